"""Learning-rate schedules, built from config as partials completed with the total step count.

Each schedule is a ``LambdaLR`` over a small factor object. A run with a time budget drives it by the clock:
``attend.callbacks.FollowTheClock`` calls ``follow_clock`` with the elapsed share of the budget after every step,
and the cosine's progress follows that share instead of the step count, never going back. LambdaLR saves the
object's fields in checkpoints, so a resumed run keeps them.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


class WarmupCosine:
    """Linear warm-up, then a cosine decay to ``final_ratio`` of the peak rate.

    By steps (no time budget): the cosine's progress runs from 0 at the end of the warm-up to 1 at
    ``total_steps``. By the clock (``follow_clock``): from the progress it had when the clock took over to 1 when
    the elapsed share of the budget reaches 1, and it never goes back, so the rate never rises after the warm-up.
    """

    def __init__(self, total_steps: int, warmup_steps: int = 200, final_ratio: float = 0.05) -> None:
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.final_ratio = final_ratio
        self.clock_progress: float | None = None  # the progress the clock has set; None: by steps
        self.clock_anchor: tuple[float, float] | None = None  # (share, progress) when the clock took over

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = self.progress(step)
        return self.final_ratio + (1 - self.final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def progress(self, step: int) -> float:
        """How far along the cosine ``step`` is, in [0, 1]."""
        if self.clock_progress is not None:
            return self.clock_progress
        return max(0.0, min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)))

    def follow_clock(self, share: float, step: int) -> None:
        """The elapsed ``share`` of the budget after ``step``: the cosine's progress from then on (the warm-up,
        counted in steps, is left alone)."""
        if step + 1 < self.warmup_steps:
            return  # the next step is still warming up
        if self.clock_anchor is None:  # the clock takes over from here: no jump in the rate
            self.clock_anchor = (share, self.progress(step + 1))
        anchor_share, anchor_progress = self.clock_anchor
        moved = anchor_progress + (1 - anchor_progress) * (share - anchor_share) / max(1e-9, 1 - anchor_share)
        self.clock_progress = max(self.clock_progress or 0.0, min(1.0, moved))


class WarmupConstant:
    """A constant rate after an optional linear warm-up (``total_steps`` is kept but not used)."""

    def __init__(self, total_steps: int, warmup_steps: int = 0) -> None:
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        return min(1.0, (step + 1) / max(1, self.warmup_steps))

    def follow_clock(self, share: float, step: int) -> None:
        """Nothing: the rate does not depend on the time."""


def warmup_cosine(optimizer: Optimizer, total_steps: int, warmup_steps: int = 200, final_ratio: float = 0.05):
    """Linear warm-up, then a cosine decay to ``final_ratio`` of the peak rate at the last step."""
    return LambdaLR(optimizer, WarmupCosine(total_steps, warmup_steps, final_ratio))


def constant(optimizer: Optimizer, total_steps: int, warmup_steps: int = 0):
    """A constant rate after an optional linear warm-up."""
    return LambdaLR(optimizer, WarmupConstant(total_steps, warmup_steps))
