"""Learning-rate schedules, built from config as partials completed with the total step count."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def warmup_cosine(optimizer: Optimizer, total_steps: int, warmup_steps: int = 200, final_ratio: float = 0.05):
    """Linear warm-up, then a cosine decay to ``final_ratio`` of the peak rate at the last step."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)


def constant(optimizer: Optimizer, total_steps: int, warmup_steps: int = 0):
    """A constant rate after an optional linear warm-up."""
    return LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / max(1, warmup_steps)))
