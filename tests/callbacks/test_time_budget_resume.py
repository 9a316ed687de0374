"""Resuming under a time budget: a run killed mid-epoch goes on with the clock it had (the Timer's elapsed time and
the measured validations travel in checkpoints), and a run the budget had stopped does not train again."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from tests.helpers.time_budget import (
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
    model, budget = steady(clock), RecordingBudget()
    model.crash_at_step = crash_at
    checkpoint = ModelCheckpoint(dirpath=folder, filename="last", monitor=None, save_top_k=1, **ckpt)
    run = trainer(BUDGET, max_epochs, callbacks=[budget, checkpoint])
    run.fit(model, data(), data(4), ckpt_path=ckpt_path)
    return run, model, budget


def test_a_run_resumed_mid_epoch_goes_on_with_its_clock(clock, tmp_path):
    """Killed after step 23, resumed from step 21's checkpoint on another process's clock: the same rates step for
    step, the same validations and the same stop as the run that was never killed."""
    whole, whole_model, whole_budget = train(clock, tmp_path / "whole")
    clock.now = 0.0
    with pytest.raises(Crash):
        train(clock, tmp_path / "killed", crash_at=CRASH_AT, every_n_train_steps=CHECKPOINT_EVERY)
    clock.now = 1000.0  # another process, another clock: the timer's own count comes from the checkpoint
    resumed, model, budget = train(
        clock, tmp_path / "resumed", ckpt_path=tmp_path / "killed" / "last.ckpt", every_n_train_steps=CHECKPOINT_EVERY,
    )
    assert resumed.global_step == whole.global_step and budget.stopped_at == pytest.approx(whole_budget.stopped_at)
    assert model.rates == whole_model.rates[-len(model.rates):]  # the same schedule, step for step
    assert budget.validations == [v for v in whole_budget.validations if v[0] > 21]
    assert never_rises(model.rates)


def test_a_finished_run_resumed_does_not_train_again(clock, tmp_path):
    finished, _, finished_budget = train(clock, tmp_path / "finished")
    resumed, model, budget = train(clock, tmp_path / "again", ckpt_path=tmp_path / "finished" / "last.ckpt")
    assert model.rates == [] and resumed.global_step == finished.global_step
    assert finished_budget.stopped_at is not None and budget.stopped_at == finished_budget.stopped_at
