"""Fit the number of epochs and the learning-rate schedule to the wall-clock budget ``trainer.max_time``."""

from __future__ import annotations

import logging
import math

import lightning as L
from lightning.pytorch.callbacks import Timer

from attend.optim import set_horizon

log = logging.getLogger(__name__)


class FitScheduleToTime(L.Callback):
    """With ``trainer.max_time`` set: at the end of every epoch (training and validation), count how many
    whole epochs fit in the time left at the pace of the epoch just ended, and make the last of them the
    last epoch and the end of the learning-rate schedule.

    So a run uses the minutes it is given: a faster machine trains more epochs and a slower one fewer, and
    either way the schedule (warm-up + cosine) ends where training ends, with a validation of the annealed
    model, instead of being cut off mid-decay. The count is revised after each epoch because the first one
    is slow (its validation decodes an untrained model's long outputs), so it mostly grows by an epoch or
    two early on, which moves the cosine by a few percent. ``margin`` keeps that share of the budget spare,
    so the last epoch ends before the hard stop. ``trainer.max_epochs`` stays an upper bound. Without
    ``max_time`` nothing changes (the schedule runs over ``max_epochs``, and a run is deterministic for its
    seed). A resumed run counts again at the end of its first epoch (Lightning's timer and the schedule's
    horizon come back from the checkpoint), so a larger ``max_epochs`` or ``max_time`` given on resuming
    takes effect.
    """

    def __init__(self, margin: float = 0.03) -> None:
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"callbacks.time_budget.margin must be in [0, 1), got {margin}")
        self.margin = margin
        self.fitted_epochs: int | None = None
        self._last_elapsed = 0.0  # the timer's reading at the end of the previous epoch
        self._max_epochs: int | None = None  # trainer.max_epochs as configured, before any fitting

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = _timer(trainer)
        self._last_elapsed = timer.time_elapsed() if timer is not None else 0.0
        self._max_epochs = trainer.max_epochs

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = _timer(trainer)
        if timer is None or timer.time_remaining() is None:
            return
        elapsed = timer.time_elapsed()
        per_epoch, self._last_elapsed = elapsed - self._last_elapsed, elapsed
        epochs_done = trainer.current_epoch + 1
        spare = timer.time_remaining() - self.margin * (timer.time_remaining() + elapsed)
        epochs = epochs_done + max(0, math.floor(spare / max(per_epoch, 1e-6)))
        if self._max_epochs is not None and self._max_epochs > 0:
            epochs = min(epochs, self._max_epochs)
        changed = epochs != self.fitted_epochs
        self.fit(trainer, epochs)
        if changed:
            log.info(
                "time budget: %.0f s an epoch, %d epochs fit in trainer.max_time; the schedule now ends at step %d",
                per_epoch, epochs, self.horizon(trainer, epochs),
            )

    def fit(self, trainer: L.Trainer, epochs: int) -> None:
        """Make ``epochs`` the last epoch and the end of every Attend schedule."""
        self.fitted_epochs = epochs
        trainer.fit_loop.max_epochs = epochs
        for config in trainer.lr_scheduler_configs:
            set_horizon(config.scheduler, self.horizon(trainer, epochs))

    @staticmethod
    def horizon(trainer: L.Trainer, epochs: int) -> int:
        """Optimizer steps in ``epochs`` epochs."""
        per_epoch = math.ceil(trainer.num_training_batches / trainer.accumulate_grad_batches)
        return epochs * per_epoch

    def state_dict(self) -> dict:
        return {"fitted_epochs": self.fitted_epochs}

    def load_state_dict(self, state_dict: dict) -> None:
        self.fitted_epochs = state_dict.get("fitted_epochs")


def _timer(trainer: L.Trainer) -> Timer | None:
    """Lightning's Timer callback, there when ``trainer.max_time`` is set."""
    return next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
