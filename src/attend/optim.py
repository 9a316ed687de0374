"""Learning-rate schedules, built from config as partials completed with the total step count.

Each schedule is a ``LambdaLR`` over a small factor object whose ``total_steps`` (the horizon) can be
moved after the run has started: ``attend.time_budget.FitScheduleToTime`` sets it to the steps that fit
in ``trainer.max_time``. LambdaLR saves the object's fields in checkpoints, so a resumed run keeps them.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


class WarmupCosine:
    """Linear warm-up, then a cosine decay to ``final_ratio`` of the peak rate at ``total_steps``."""

    def __init__(self, total_steps: int, warmup_steps: int = 200, final_ratio: float = 0.05) -> None:
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.final_ratio = final_ratio

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.final_ratio + (1 - self.final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


class WarmupConstant:
    """A constant rate after an optional linear warm-up (``total_steps`` is kept but not used)."""

    def __init__(self, total_steps: int, warmup_steps: int = 0) -> None:
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        return min(1.0, (step + 1) / max(1, self.warmup_steps))


def warmup_cosine(optimizer: Optimizer, total_steps: int, warmup_steps: int = 200, final_ratio: float = 0.05):
    """Linear warm-up, then a cosine decay to ``final_ratio`` of the peak rate at the last step."""
    return LambdaLR(optimizer, WarmupCosine(total_steps, warmup_steps, final_ratio))


def constant(optimizer: Optimizer, total_steps: int, warmup_steps: int = 0):
    """A constant rate after an optional linear warm-up."""
    return LambdaLR(optimizer, WarmupConstant(total_steps, warmup_steps))


def set_horizon(scheduler, total_steps: int) -> bool:
    """Move the horizon of an Attend schedule; False for a scheduler that has none (left as it is)."""
    factors = getattr(scheduler, "lr_lambdas", [])
    movable = [factor for factor in factors if hasattr(factor, "total_steps")]
    for factor in movable:
        factor.total_steps = total_steps
    return bool(movable)
