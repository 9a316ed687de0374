"""Fit the number of epochs and the learning-rate schedule to the wall-clock budget ``trainer.max_time``."""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass

import lightning as L
from lightning.pytorch.callbacks import Timer

from attend.optim import set_horizon

log = logging.getLogger(__name__)
PACE_WINDOW = 5  # the pace is the median of this many latest whole epochs (the first one left out)


@dataclass(frozen=True)
class Plan:
    """The decision rank 0 takes after an epoch and every rank applies."""

    epochs: int  # the last epoch (a count)
    horizon: int  # the optimizer step where the schedule ends
    paces: tuple[float, ...]  # seconds of each whole epoch measured so far


class FitScheduleToTime(L.Callback):
    """With ``trainer.max_time`` set: after every epoch (training and validation), plan how many epochs fit in
    the budget and make the last of them the last epoch and the end of the learning-rate schedule.

    So a run uses the minutes it is given: a faster machine trains more epochs and a slower one fewer, and
    either way the schedule (warm-up + cosine) ends where training ends, with a validation of the annealed
    model. The pace is the median time of the latest whole epochs, the first one (its validation decodes an
    untrained model's long outputs) counting only while it is the only one. The plan shrinks as soon as it no
    longer fits leaving ``margin`` of the budget spare, and grows only when more epochs fit leaving 1.5
    margins, so noise does not move it back and forth. When it moves, the cosine goes on from the
    rate it has reached (``attend.optim``), so after the warm-up the rate never rises. Rank 0 decides and
    broadcasts, so every DDP rank has the same plan whatever its own clock says. ``trainer.max_epochs``
    stays an upper bound; without ``max_time`` nothing changes. The plan and the paces travel in checkpoints:
    a resumed run keeps its plan (an epoch resumed in the middle gives no pace) and a run that had finished
    does not train again, unless ``max_epochs`` had ended it and is larger now; a larger ``max_time`` given
    on resuming an unfinished run lets the plan grow.
    """

    def __init__(self, margin: float = 0.03) -> None:
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"callbacks.time_budget.margin must be in [0, 1), got {margin}")
        self.margin = margin
        self.fitted_epochs: int | None = None
        self.paces: tuple[float, ...] = ()
        self._last_elapsed = 0.0  # the timer's reading at the end of the previous epoch (or at the start)
        self._whole_epoch = False  # False for an epoch resumed in the middle: its time is not an epoch's
        self._max_epochs: int | None = None  # trainer.max_epochs as configured, before any fitting
        self._planned_cap: int | None = None  # the max_epochs the restored plan was made under

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = _timer(trainer)
        self._last_elapsed = timer.time_elapsed() if timer is not None else 0.0
        self._whole_epoch = False  # on_train_epoch_start says otherwise, unless Lightning resumes mid-epoch
        self._max_epochs = trainer.max_epochs
        if _budget(timer) is not None and self.fitted_epochs is not None and not self._cap_raised():
            trainer.fit_loop.max_epochs = self._capped(self.fitted_epochs)  # a finished run trains no more

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._whole_epoch = True

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = _timer(trainer)
        budget = _budget(timer)
        if budget is None:
            return
        elapsed = timer.time_elapsed()
        plan = self.decide(trainer, elapsed, budget) if trainer.is_global_zero else None
        self._last_elapsed = elapsed
        self.apply(trainer, trainer.strategy.broadcast(plan, src=0))

    def decide(self, trainer: L.Trainer, elapsed: float, budget: float) -> Plan | None:
        """The plan after this epoch from this rank's clock (rank 0's counts); None before any whole epoch."""
        paces = self.paces + ((elapsed - self._last_elapsed,) if self._whole_epoch else ())
        if not paces:
            return None
        epochs = self.plan(elapsed, budget, trainer.current_epoch + 1, pace(paces))
        return Plan(epochs, self.horizon(trainer, epochs), paces)

    def plan(self, elapsed: float, budget: float, done: int, seconds: float) -> int:
        """The last epoch: the current plan while it fits leaving the margin and no more fit leaving 1.5 margins."""
        def most(spare: float) -> int:
            return self._capped(done + max(0, math.floor(((1 - spare) * budget - elapsed) / seconds)))

        current = None if self.fitted_epochs is None else self._capped(self.fitted_epochs)
        fitting = most(self.margin)
        if current is None or current > fitting:
            return max(done, fitting)
        return max(done, current, most(1.5 * self.margin))  # a band of half a margin: noise does not move it

    def apply(self, trainer: L.Trainer, plan: Plan | None) -> None:
        """Make ``plan.epochs`` the last epoch and ``plan.horizon`` the end of every Attend schedule."""
        if plan is None:
            return
        changed = plan.epochs != self.fitted_epochs
        self.fitted_epochs, self.paces = plan.epochs, plan.paces
        trainer.fit_loop.max_epochs = plan.epochs
        if changed:
            for config in trainer.lr_scheduler_configs:
                set_horizon(config.scheduler, plan.horizon)
            log.info(
                "time budget: %.0f s an epoch, %d epochs fit in trainer.max_time; the schedule now ends at step %d",
                pace(plan.paces), plan.epochs, plan.horizon,
            )

    @staticmethod
    def horizon(trainer: L.Trainer, epochs: int) -> int:
        """Optimizer steps in ``epochs`` epochs."""
        per_epoch = math.ceil(trainer.num_training_batches / trainer.accumulate_grad_batches)
        return epochs * per_epoch

    def _capped(self, epochs: int) -> int:
        """``epochs``, at most the configured ``max_epochs``."""
        if self._max_epochs is not None and self._max_epochs > 0:
            return min(epochs, self._max_epochs)
        return epochs

    def _cap_raised(self) -> bool:
        """The restored plan was max_epochs's, and max_epochs is larger now: the clock decides again."""
        cap = self._planned_cap
        return cap is not None and cap > 0 and self.fitted_epochs >= cap and self._capped(cap + 1) > cap

    def state_dict(self) -> dict:
        return {"fitted_epochs": self.fitted_epochs, "paces": list(self.paces), "max_epochs": self._max_epochs}

    def load_state_dict(self, state_dict: dict) -> None:
        self.fitted_epochs = state_dict.get("fitted_epochs")
        self.paces = tuple(state_dict.get("paces", ()))
        self._planned_cap = state_dict.get("max_epochs")


def pace(paces: tuple[float, ...]) -> float:
    """Seconds an epoch: the median of the latest whole epochs, the first one only while it is alone."""
    later = paces[1:][-PACE_WINDOW:] or paces[:1]
    return max(statistics.median(later), 1e-6)


def _timer(trainer: L.Trainer) -> Timer | None:
    """Lightning's Timer callback, there when ``trainer.max_time`` is set."""
    return next((c for c in trainer.callbacks if isinstance(c, Timer)), None)


def _budget(timer: Timer | None) -> float | None:
    """The training budget in seconds, or None without ``max_time``."""
    if timer is None or timer.time_remaining() is None:
        return None
    return timer.time_elapsed() + timer.time_remaining()
