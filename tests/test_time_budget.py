"""The schedule fitted to trainer.max_time: epochs and the cosine horizon follow the measured epoch time, and
after the warm-up the learning rate never rises however the epoch times vary."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from itertools import pairwise

import lightning as L
import lightning.pytorch.callbacks.timer as timer_module
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from attend.callbacks import FitScheduleToTime
from attend.optim import WarmupCosine, set_horizon, warmup_cosine

BATCHES = 5
STEP_SECONDS = 0.06
WARMUP = 2
StepSeconds = Callable[[int, int, int], float]  # (epoch, batch, rank) -> seconds a training step takes


class FakeClock:
    """A monotonic clock that moves only when the model says so, in place of the one Lightning's Timer reads."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """A FakeClock that Lightning's Timer reads for this test."""
    clock = FakeClock()
    monkeypatch.setattr(timer_module, "time", clock)
    return clock


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return fake_clock(monkeypatch)


def schedule(module: L.LightningModule) -> dict:
    """Attend's warm-up + cosine over the steps of ``max_epochs``, stepped every optimizer step, as the model has it."""
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    total = int(module.trainer.estimated_stepping_batches)
    scheduler = warmup_cosine(optimizer, total_steps=total, warmup_steps=WARMUP, final_ratio=0.0)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class SlowRegression(L.LightningModule):
    """A linear model whose steps take a known real time."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)
        self.rates: list[float] = []

    def training_step(self, batch, batch_idx):
        time.sleep(STEP_SECONDS)
        self.rates.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return schedule(self)


class Crash(RuntimeError):
    """A run killed in the middle of an epoch."""


class ClockedRegression(SlowRegression):
    """A linear model whose training steps and validations move a FakeClock by the given seconds."""

    def __init__(self, clock: FakeClock, step_seconds: StepSeconds, validation_seconds: Callable[[int], float]):
        super().__init__()
        self.clock, self.step_seconds, self.validation_seconds = clock, step_seconds, validation_seconds
        self.validated: list[int] = []  # the epoch of each validation
        self.crash_at_step: int | None = None

    def training_step(self, batch, batch_idx):
        if self.global_step == self.crash_at_step:
            raise Crash(f"killed at step {self.global_step}")
        self.clock.now += self.step_seconds(self.current_epoch, batch_idx, self.global_rank)
        self.rates.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        self.clock.now += self.validation_seconds(self.current_epoch)
        self.validated.append(self.current_epoch)


class RecordingBudget(FitScheduleToTime):
    """Keeps each epoch's count."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.counts: list[int | None] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        self.counts.append(self.fitted_epochs)


def data(samples: int = BATCHES * 4) -> DataLoader:
    """``samples`` random regression pairs in batches of 4."""
    generator = torch.Generator().manual_seed(0)
    pairs = TensorDataset(torch.randn(samples, 2, generator=generator), torch.randn(samples, 1))
    return DataLoader(pairs, batch_size=4)


def trainer(max_time, max_epochs: int = 1000, callbacks: tuple = (), **kwargs) -> L.Trainer:
    """A quiet CPU Trainer (checkpoints only from the callbacks given)."""
    return L.Trainer(
        max_epochs=max_epochs, max_time=max_time, callbacks=list(callbacks), logger=False,
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks), enable_progress_bar=False,
        enable_model_summary=False, accelerator="cpu", num_sanity_val_steps=0, **kwargs,
    )


def fit(max_time, max_epochs=1000, model: L.LightningModule | None = None, margin: float = 0.1):
    model, budget = model or SlowRegression(), RecordingBudget(margin=margin)
    run = trainer(max_time, max_epochs, [budget])
    run.fit(model, data(), data(4) if isinstance(model, ClockedRegression) else None)
    return run, model, budget


def noisy_pace(seed: int, first_validation: float = 90.0) -> tuple[StepSeconds, Callable[[int], float]]:
    """Epochs of about 30 s whose speed varies by up to 40% from one epoch to the next; a slow first validation."""
    rng = random.Random(seed)
    speed = [rng.uniform(0.6, 1.4) for _ in range(200)]
    jitter = [[rng.uniform(0.9, 1.1) for _ in range(BATCHES)] for _ in range(200)]
    return (lambda epoch, batch, rank: 6.0 * speed[epoch] * jitter[epoch][batch],
            lambda epoch: first_validation if epoch == 0 else 2.0)


def never_rises(rates: Sequence[float]) -> bool:
    """Each rate is at most the one before."""
    return all(later <= earlier for earlier, later in pairwise(rates))


def schedule_at_its_end(run: L.Trainer) -> bool:
    """The schedule has reached the end of its cosine."""
    scheduler = run.lr_scheduler_configs[0].scheduler
    return scheduler.lr_lambdas[0].progress(scheduler.last_epoch) == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_noisy_epoch_times_never_raise_the_rate_and_the_run_ends_annealed(clock, seed):
    """Epoch times drawn at random around 30 s in a 600 s budget: the plan may move, the rate may not rise."""
    run, model, budget = fit({"seconds": 600}, model=ClockedRegression(clock, *noisy_pace(seed)), margin=0.05)
    assert never_rises(model.rates[WARMUP:]), model.rates
    assert run.current_epoch == budget.fitted_epochs  # ended by the plan, not cut off by the timer
    assert len(model.rates) == budget.fitted_epochs * BATCHES
    assert schedule_at_its_end(run) and model.rates[-1] < 0.1 * 0.05
    assert model.validated[-1] == budget.fitted_epochs - 1  # the final model was validated
    assert 0.75 * 600 < clock.now < 600  # used the minutes, ended before the hard stop


def test_a_slow_first_epoch_is_made_up_for_by_later_counts(clock):
    """The first epoch's pace would fit few epochs; the count grows as the faster epochs come in."""
    model = ClockedRegression(clock, lambda epoch, batch, rank: 6.0 * (4 if epoch == 0 else 1), lambda epoch: 0.0)
    run, model, budget = fit({"seconds": 600}, model=model)
    assert budget.counts[0] < budget.counts[-1] == budget.fitted_epochs == run.current_epoch
    assert budget.counts[1:] == [budget.counts[1]] * len(budget.counts[1:])  # steady pace, steady plan
    assert schedule_at_its_end(run)


def test_epochs_and_schedule_fit_a_real_time_budget():
    run, model, budget = fit({"seconds": 3})
    epoch_seconds = BATCHES * STEP_SECONDS
    assert budget.fitted_epochs is not None
    # about (3 s * 0.9) / 0.3 s = 9 epochs; the sleeps are lower bounds of the real step time
    assert 3 <= budget.fitted_epochs <= int(3 * 0.9 / epoch_seconds)
    assert run.current_epoch == budget.fitted_epochs  # stopped by the fitted epoch count, not the timer
    assert len(model.rates) == budget.fitted_epochs * BATCHES
    # the cosine reaches its end at the last step instead of being cut off near the peak rate
    assert model.rates[-1] < 0.1 * 0.05
    assert max(model.rates) == pytest.approx(0.1, rel=0.02)


def reference_warmup_cosine(step: int, total: int, warmup: int, final: float) -> float:
    """The warm-up + cosine as it was before its horizon could move (a fixed schedule must stay bit for bit)."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize(
    ("total", "warmup", "final"), [(2000, 200, 0.05), (12 * 437, 200, 0.05), (97, 3, 0.0), (5, 10, 0.1)],
)
def test_a_fixed_schedule_is_bit_for_bit_the_same(total, warmup, final):
    factor = WarmupCosine(total, warmup, final)
    assert all(factor(step) == reference_warmup_cosine(step, total, warmup, final) for step in range(total + 5))


def test_without_max_time_nothing_changes():
    run, model, budget = fit(None, max_epochs=2)
    assert budget.fitted_epochs is None and run.current_epoch == 2
    steps = 2 * BATCHES
    assert model.rates == [0.1 * reference_warmup_cosine(step, steps, WARMUP, 0.0) for step in range(steps)]


def test_max_epochs_stays_an_upper_bound():
    run, model, budget = fit({"seconds": 30}, max_epochs=3)
    assert budget.fitted_epochs == 3 and run.current_epoch == 3


@pytest.mark.parametrize("new_total", [60, 200, 1000])
def test_a_moved_horizon_goes_on_from_the_rate_reached_and_ends_there(new_total):
    factor = WarmupCosine(100, warmup_steps=10, final_ratio=0.05)
    before = [factor(step) for step in range(51)]
    factor.set_horizon(new_total, 50)
    rates = [factor(step) for step in range(50, new_total + 1)]
    assert rates[0] == before[-1]  # no jump
    assert never_rises(rates)
    assert rates[-1] == pytest.approx(0.05) and factor.progress(new_total) == 1.0


def test_a_horizon_moved_during_the_warm_up_keeps_the_whole_cosine():
    factor = WarmupCosine(100, warmup_steps=10, final_ratio=0.0)
    factor.set_horizon(50, 5)
    assert factor(10) == 1.0 and factor(30) == pytest.approx(0.5) and factor(50) == pytest.approx(0.0)


def test_horizon_moves_and_travels_in_the_scheduler_state():
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    scheduler = warmup_cosine(optimizer, total_steps=1000, warmup_steps=0, final_ratio=0.0)
    for _ in range(100):
        optimizer.step()
        scheduler.step()
    assert set_horizon(scheduler, 200)
    assert scheduler.lr_lambdas[0](200) == pytest.approx(0.0)
    restored = warmup_cosine(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0), total_steps=1000)
    restored.load_state_dict(scheduler.state_dict())
    assert restored.lr_lambdas[0].total_steps == 200
    assert [restored.lr_lambdas[0](s) for s in range(100, 201)] == [scheduler.lr_lambdas[0](s) for s in range(100, 201)]
    assert not set_horizon(torch.optim.lr_scheduler.StepLR(optimizer, 5), 10)
    assert WarmupCosine(100, warmup_steps=10)(4) == pytest.approx(0.5)
