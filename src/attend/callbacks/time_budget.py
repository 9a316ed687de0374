"""The wall-clock budget ``trainer.max_time``: a learning-rate schedule that follows the clock, and a stop, even in
the middle of an epoch, that leaves the time of one last validation and its checkpoints."""

from __future__ import annotations

import logging
import math

import lightning as L
from lightning.pytorch.callbacks import Timer

log = logging.getLogger(__name__)


class FollowTheClock(L.Callback):
    """With ``trainer.max_time`` set, the run is planned in seconds, not in epochs (budgeted training, Li et al.
    2020; Izsak et al. 2021 and Geiping and Goldstein's "Cramming", 2022, tie the schedule to the elapsed share
    of a wall-clock budget):

    - **The schedule follows the clock.** After every optimizer step the schedule's progress (Attend's
      ``WarmupCosine``: warm-up in steps, then the cosine) is the elapsed share of the budget left for training,
      ``elapsed / (budget - reserve)``, so the rate reaches its floor when the budget ends, however fast the
      machine is and however its speed changes during the run. The progress never goes back, so after the
      warm-up the rate never rises. ``trainer.max_epochs`` (or ``max_steps``) stays an upper bound: the progress
      is the larger of the clock's share and the share of those steps done.
    - **The stop leaves one last validation.** ``reserve`` is the time the latest validations took, from their
      start to the next training step (the plots and the checkpoints they choose included), times
      ``reserve_factor``; before any was measured, ``first_reserve`` of the budget. Training stops once the next
      step would reach into it, in the middle of an epoch if need be; Lightning then validates that model and the
      checkpoint callbacks choose as after every validation. So no minute is left unused waiting for an epoch's
      end, and none is spent past the budget.
    - Rank 0 decides after every step and broadcasts, so every DDP rank has the same schedule and stops at the
      same step whatever its own clock says. The elapsed time is Lightning's Timer's, which checkpoints carry: a
      resumed run goes on with the share it had, and a run that had stopped at its budget does not train again.

    Without ``max_time`` it does nothing: fixed-step runs keep their schedule bit for bit.
    """

    def __init__(self, reserve_factor: float = 1.25, first_reserve: float = 0.05) -> None:
        if reserve_factor < 1.0:
            raise ValueError(f"callbacks.time_budget.reserve_factor must be 1 or more, got {reserve_factor}")
        if not 0.0 <= first_reserve < 0.5:
            raise ValueError(f"callbacks.time_budget.first_reserve must be in [0, 0.5), got {first_reserve}")
        self.reserve_factor, self.first_reserve = reserve_factor, first_reserve
        self.validation_seconds: list[float] = []  # each validation's time, to the next training step
        self.stopped_at: float | None = None  # the elapsed seconds when the budget stopped training (checkpointed)
        self.budget: float | None = None
        self._validation_started: float | None = None
        self._last_end: float | None = None  # the elapsed seconds at the end of the previous step
        self._step_seconds: float | None = None  # a smoothed training step's time
        self._stopping = False
        self._timer: Timer | None = None  # Lightning's, found once a fit
        self._total_steps = math.inf  # the steps max_epochs (or max_steps) allows, found once a fit

    # what the callback measures

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.budget = budget_seconds(trainer)
        self._last_end, self._validation_started, self._stopping = None, None, False
        self._timer, self._total_steps = _timer(trainer), trainer.estimated_stepping_batches
        if self.budget is not None and self.stopped_at is not None:
            trainer.should_stop = True  # resumed after its budget had ended it: the run is over
            self._stopping = True

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.budget is not None and not trainer.sanity_checking:
            self._validation_started = self._elapsed()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx) -> None:
        self._close_validation(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._close_validation(trainer)

    def _close_validation(self, trainer: L.Trainer) -> None:
        if self._validation_started is None:
            return
        now = self._elapsed()
        self.validation_seconds = (self.validation_seconds + [now - self._validation_started])[-5:]
        self._validation_started, self._last_end = None, now  # the next step's time starts here

    # what it decides after each step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx
                           ) -> None:
        if self.budget is None or self._stopping:
            return
        decision = self.decide(trainer) if trainer.is_global_zero else None
        if trainer.world_size > 1:
            decision = trainer.strategy.broadcast(decision, src=0)
        share, stop = decision
        for config in trainer.lr_scheduler_configs:
            follow_clock(config.scheduler, max(share, steps_share(trainer.global_step, self._total_steps)))
        if stop:
            self.stop(trainer)

    def decide(self, trainer: L.Trainer) -> tuple[float, bool]:
        """(the elapsed share of the training budget, whether to stop now) by this rank's clock."""
        now = self._elapsed()
        if self._last_end is not None:
            step = now - self._last_end
            self._step_seconds = step if self._step_seconds is None else 0.8 * self._step_seconds + 0.2 * step
        self._last_end = now
        reserve = self.reserve()
        share = min(1.0, now / max(self.budget - reserve, 1e-9))
        return share, now + (self._step_seconds or 0.0) + reserve >= self.budget

    def reserve(self) -> float:
        """Seconds kept for the last validation and its checkpoints."""
        if not self.validation_seconds:
            return self.first_reserve * self.budget
        return self.reserve_factor * max(self.validation_seconds[-3:])

    def stop(self, trainer: L.Trainer) -> None:
        self._stopping = True
        trainer.should_stop = True  # Lightning validates this model before it ends the fit
        self.stopped_at = self._elapsed()
        for config in trainer.lr_scheduler_configs:
            follow_clock(config.scheduler, 1.0)  # the schedule ends with the training, at its floor
        log.info("time budget: training stops at step %d (epoch %d), %.0f s of %.0f s used, %.0f s kept for a last "
                 "validation and its checkpoints", trainer.global_step, trainer.current_epoch, self.stopped_at,
                 self.budget, self.reserve())

    def _elapsed(self) -> float:
        """Seconds of training so far, by the Timer (a resumed run's earlier time included)."""
        return self._timer.time_elapsed() if self._timer is not None else 0.0

    def state_dict(self) -> dict:
        return {"validation_seconds": list(self.validation_seconds), "stopped_at": self.stopped_at,
                "step_seconds": self._step_seconds}

    def load_state_dict(self, state_dict: dict) -> None:
        self.validation_seconds = list(state_dict.get("validation_seconds", []))
        self.stopped_at = state_dict.get("stopped_at")
        self._step_seconds = state_dict.get("step_seconds")


def follow_clock(scheduler, share: float) -> bool:
    """Set the progress of every Attend schedule factor of ``scheduler`` to the elapsed ``share`` of the budget;
    False for a scheduler that has none (it keeps its own steps)."""
    factors = [factor for factor in getattr(scheduler, "lr_lambdas", []) if hasattr(factor, "follow_clock")]
    for factor in factors:
        factor.follow_clock(share, scheduler.last_epoch)
    return bool(factors)


def steps_share(step: int, total: float) -> float:
    """The share of the ``total`` steps max_epochs (or max_steps) allows done, 0 when neither bounds the run."""
    if not math.isfinite(total) or total <= 0:
        return 0.0
    return min(1.0, step / total)


def _timer(trainer: L.Trainer) -> Timer | None:
    """Lightning's Timer callback, there when ``trainer.max_time`` is set."""
    return next((c for c in trainer.callbacks if isinstance(c, Timer)), None)


def budget_seconds(trainer: L.Trainer) -> float | None:
    """The run's training budget (``trainer.max_time``) in seconds, or None without one."""
    timer = _timer(trainer)
    if timer is None or timer.time_remaining() is None:
        return None
    return timer.time_elapsed() + timer.time_remaining()
