"""The schedule fitted to trainer.max_time: epochs and the cosine horizon follow the measured epoch time."""

import time

import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from attend.optim import WarmupCosine, set_horizon, warmup_cosine
from attend.time_budget import FitScheduleToTime

BATCHES = 5
STEP_SECONDS = 0.06


class SlowRegression(L.LightningModule):
    """A linear model whose steps take a known time, with Attend's warm-up + cosine schedule."""

    def __init__(self, first_epoch_slowdown: float = 1.0) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)
        self.rates: list[float] = []
        self.first_epoch_slowdown = first_epoch_slowdown

    def training_step(self, batch, batch_idx):
        time.sleep(STEP_SECONDS * (self.first_epoch_slowdown if self.current_epoch == 0 else 1.0))
        self.rates.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        total = int(self.trainer.estimated_stepping_batches)
        scheduler = warmup_cosine(optimizer, total_steps=total, warmup_steps=2, final_ratio=0.0)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class RecordingBudget(FitScheduleToTime):
    """Keeps each epoch's count."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.counts: list[int | None] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        self.counts.append(self.fitted_epochs)


def fit(max_time, max_epochs=1000, first_epoch_slowdown=1.0):
    data = DataLoader(TensorDataset(torch.randn(BATCHES * 4, 2), torch.randn(BATCHES * 4, 1)), batch_size=4)
    model, budget = SlowRegression(first_epoch_slowdown), RecordingBudget(margin=0.1)
    trainer = L.Trainer(
        max_epochs=max_epochs, max_time=max_time, callbacks=[budget], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
    )
    trainer.fit(model, data)
    return trainer, model, budget


def test_epochs_and_schedule_fit_the_time_budget():
    trainer, model, budget = fit({"seconds": 3})
    epoch_seconds = BATCHES * STEP_SECONDS
    assert budget.fitted_epochs is not None
    # about (3 s * 0.9) / 0.3 s = 9 epochs; the sleeps are lower bounds of the real step time
    assert 3 <= budget.fitted_epochs <= int(3 * 0.9 / epoch_seconds)
    assert trainer.current_epoch == budget.fitted_epochs  # stopped by the fitted epoch count, not the timer
    assert len(model.rates) == budget.fitted_epochs * BATCHES
    # the cosine reaches its end at the last step instead of being cut off near the peak rate
    assert model.rates[-1] < 0.1 * 0.05
    assert max(model.rates) == pytest.approx(0.1, rel=0.02)


def test_a_slow_first_epoch_is_made_up_for_by_later_counts():
    """The first epoch's pace would fit few epochs; the count grows as the faster epochs come in."""
    trainer, model, budget = fit({"seconds": 3}, first_epoch_slowdown=4.0)
    assert budget.counts[0] < budget.counts[-1] == budget.fitted_epochs == trainer.current_epoch
    assert model.rates[-1] < 0.1 * 0.05  # the schedule still ends with training


def test_without_max_time_nothing_changes():
    trainer, model, budget = fit(None, max_epochs=2)
    assert budget.fitted_epochs is None and trainer.current_epoch == 2
    assert len(model.rates) == 2 * BATCHES


def test_max_epochs_stays_an_upper_bound():
    trainer, model, budget = fit({"seconds": 30}, max_epochs=3)
    assert budget.fitted_epochs == 3 and trainer.current_epoch == 3


def test_horizon_moves_and_travels_in_the_scheduler_state():
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    scheduler = warmup_cosine(optimizer, total_steps=1000, warmup_steps=0, final_ratio=0.0)
    assert set_horizon(scheduler, 10)
    assert scheduler.lr_lambdas[0](10) == pytest.approx(0.0)
    restored = warmup_cosine(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0), total_steps=1000)
    restored.load_state_dict(scheduler.state_dict())
    assert restored.lr_lambdas[0].total_steps == 10
    assert not set_horizon(torch.optim.lr_scheduler.StepLR(optimizer, 5), 10)
    assert WarmupCosine(100, warmup_steps=10)(4) == pytest.approx(0.5)
