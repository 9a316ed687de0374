"""Resuming under a time budget: a run killed mid-epoch keeps its plan, and a finished run does not train again."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from tests.test_time_budget import (
    BATCHES,
    WARMUP,
    ClockedRegression,
    Crash,
    FakeClock,
    RecordingBudget,
    data,
    fake_clock,
    never_rises,
    trainer,
)

BUDGET = {"seconds": 600}
CHECKPOINT_EVERY = 7  # steps: the checkpoint before the crash falls in the middle of an epoch
CRASH_AT = 23  # after step 21 = epoch 4, batch 1 (5 batches an epoch)
pytestmark = pytest.mark.filterwarnings(
    "ignore:The dirpath has changed", "ignore:You're resuming from a checkpoint that ended before the epoch",
)


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return fake_clock(monkeypatch)


def steady(clock: FakeClock) -> ClockedRegression:
    """Epochs of 30 s after a first one of 60 s (a slow first validation)."""
    return ClockedRegression(clock, lambda epoch, batch, rank: 6.0, lambda epoch: 30.0 if epoch == 0 else 0.0)


def train(
    clock: FakeClock, folder: Path, ckpt_path: Path | None = None, crash_at: int | None = None, max_epochs: int = 1000,
    **ckpt,
):
    """A budgeted run that writes ``folder/last.ckpt`` (every epoch, or as ``ckpt`` says); returns its parts."""
    model, budget = steady(clock), RecordingBudget(margin=0.05)
    model.crash_at_step = crash_at
    checkpoint = ModelCheckpoint(dirpath=folder, filename="last", monitor=None, save_top_k=1, **ckpt)
    run = trainer(BUDGET, max_epochs, callbacks=[budget, checkpoint])
    run.fit(model, data(), data(4), ckpt_path=ckpt_path)
    return run, model, budget


def horizon(run) -> int:
    """Where the run's schedule ends."""
    return run.lr_scheduler_configs[0].scheduler.lr_lambdas[0].total_steps


def test_a_run_resumed_mid_epoch_keeps_its_plan(clock, tmp_path):
    """The resumed epoch's time is only part of an epoch's: it gives no pace, and the run goes on as planned."""
    whole, whole_model, whole_budget = train(clock, tmp_path / "whole")
    clock.now = 0.0
    with pytest.raises(Crash):
        train(clock, tmp_path / "killed", crash_at=CRASH_AT, every_n_train_steps=CHECKPOINT_EVERY)
    clock.now = 1000.0  # another process, another clock: the timer's own count comes from the checkpoint
    resumed, model, budget = train(
        clock, tmp_path / "resumed", ckpt_path=tmp_path / "killed" / "last.ckpt", every_n_train_steps=CHECKPOINT_EVERY,
    )
    assert budget.counts == whole_budget.counts[4:]  # the plan it had, from the resumed epoch to the end
    assert budget.fitted_epochs == whole_budget.fitted_epochs == resumed.current_epoch
    assert horizon(resumed) == horizon(whole) == whole_budget.fitted_epochs * BATCHES
    assert len(budget.paces) == len(whole_budget.paces) - 1  # no pace from the resumed part of epoch 4
    assert model.rates == whole_model.rates[-len(model.rates):]  # the same schedule, step for step


def test_a_finished_run_resumed_does_not_train_again(clock, tmp_path):
    finished, _, finished_budget = train(clock, tmp_path / "finished")
    resumed, model, budget = train(clock, tmp_path / "again", ckpt_path=tmp_path / "finished" / "last.ckpt")
    assert model.rates == [] and resumed.global_step == finished.global_step
    assert budget.fitted_epochs == finished_budget.fitted_epochs


def test_a_run_that_max_epochs_ended_trains_on_when_it_is_raised(clock, tmp_path):
    """max_epochs, not the clock, ended the first run: a larger one on resuming lets the clock plan again."""
    first, first_model, _ = train(clock, tmp_path / "first", max_epochs=3)
    resumed, model, budget = train(clock, tmp_path / "more", ckpt_path=tmp_path / "first" / "last.ckpt", max_epochs=5)
    assert first.current_epoch == 3 and resumed.current_epoch == budget.fitted_epochs == 5
    assert never_rises(first_model.rates[WARMUP:] + model.rates)
