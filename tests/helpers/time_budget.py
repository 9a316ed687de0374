"""A simulated run under a time budget: a regression model whose steps and validations move a fake clock that
Lightning's Timer reads, the budget callback recording its validations, and a quiet Trainer."""

from __future__ import annotations

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

from attend.callbacks import FollowTheClock
from attend.optim import warmup_cosine

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


class RecordingBudget(FollowTheClock):
    """Keeps the step and epoch of each validation."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.validations: list[tuple[float, int]] = []

    def on_validation_start(self, trainer, pl_module) -> None:
        super().on_validation_start(trainer, pl_module)
        self.validations.append((trainer.global_step, trainer.current_epoch))


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


def noisy_pace(seed: int, first_validation: float = 20.0) -> tuple[StepSeconds, Callable[[int], float]]:
    """Epochs of about 30 s whose speed varies by up to 40% from one epoch to the next; a slow first validation."""
    rng = random.Random(seed)
    speed = [rng.uniform(0.6, 1.4) for _ in range(200)]
    jitter = [[rng.uniform(0.9, 1.1) for _ in range(BATCHES)] for _ in range(200)]
    return (lambda epoch, batch, rank: 6.0 * speed[epoch] * jitter[epoch][batch],
            lambda epoch: first_validation if epoch == 0 else 2.0)


def never_rises(rates: Sequence[float]) -> bool:
    """Each rate is at most the one before."""
    return all(later <= earlier for earlier, later in pairwise(rates))
