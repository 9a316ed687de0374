"""Learning-rate schedules, built from config as partials completed with the total step count.

Each schedule is a ``LambdaLR`` over a small factor object whose ``total_steps`` (the horizon) can be
moved after the run has started: ``attend.callbacks.FitScheduleToTime`` sets it to the steps that fit
in ``trainer.max_time``. A moved cosine goes on from the rate it has reached, so the rate never jumps.
LambdaLR saves the object's fields in checkpoints, so a resumed run keeps them.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


class WarmupCosine:
    """Linear warm-up, then a cosine decay to ``final_ratio`` of the peak rate at ``total_steps``.

    The cosine's progress (0 at the peak, 1 at the end) runs linearly from ``anchor_progress`` at
    ``anchor_step`` to 1 at ``total_steps``; unmoved, that is from 0 at the end of the warm-up.
    """

    def __init__(self, total_steps: int, warmup_steps: int = 200, final_ratio: float = 0.05) -> None:
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.final_ratio = final_ratio
        self.anchor_step = warmup_steps
        self.anchor_progress = 0.0

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = self.progress(step)
        return self.final_ratio + (1 - self.final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def progress(self, step: int) -> float:
        """How far along the cosine ``step`` is, in [0, 1]."""
        # unmoved (anchor_progress 0.0) this is (step - warmup) / (total - warmup), bit for bit
        span = max(1, self.total_steps - self.anchor_step)
        moved = self.anchor_progress + (1 - self.anchor_progress) * (step - self.anchor_step) / span
        return max(0.0, min(1.0, moved))

    def set_horizon(self, total_steps: int, step: int) -> None:
        """End the cosine at ``total_steps``, going on from the progress it has at ``step``: no jump, never up."""
        if step > self.anchor_step:
            self.anchor_progress, self.anchor_step = self.progress(step), step
        self.total_steps = total_steps


class WarmupConstant:
    """A constant rate after an optional linear warm-up (``total_steps`` is kept but not used)."""

    def __init__(self, total_steps: int, warmup_steps: int = 0) -> None:
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        return min(1.0, (step + 1) / max(1, self.warmup_steps))

    def set_horizon(self, total_steps: int, step: int) -> None:
        """Keep ``total_steps`` (the rate does not depend on it)."""
        self.total_steps = total_steps


def warmup_cosine(optimizer: Optimizer, total_steps: int, warmup_steps: int = 200, final_ratio: float = 0.05):
    """Linear warm-up, then a cosine decay to ``final_ratio`` of the peak rate at the last step."""
    return LambdaLR(optimizer, WarmupCosine(total_steps, warmup_steps, final_ratio))


def constant(optimizer: Optimizer, total_steps: int, warmup_steps: int = 0):
    """A constant rate after an optional linear warm-up."""
    return LambdaLR(optimizer, WarmupConstant(total_steps, warmup_steps))


def set_horizon(scheduler, total_steps: int) -> bool:
    """Move the horizon of an Attend schedule from its current step; False for a scheduler that has none."""
    factors = getattr(scheduler, "lr_lambdas", [])
    movable = [factor for factor in factors if hasattr(factor, "set_horizon")]
    for factor in movable:
        factor.set_horizon(total_steps, scheduler.last_epoch)
    return bool(movable)
