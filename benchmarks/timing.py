"""Step timers: wall clock on the CPU, CUDA events on a GPU (no synchronisation until the end)."""

from __future__ import annotations

import time

import torch


class Timer:
    """``mark()`` returns a point in time; ``interval(a, b)`` records one; ``seconds()`` resolves them all."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.intervals: dict[str, list] = {}

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def interval(self, name: str, start, end) -> None:
        self.intervals.setdefault(name, []).append((start, end))

    def seconds(self, name: str) -> list[float]:
        """The recorded intervals of ``name`` in seconds (synchronises the GPU once)."""
        pairs = self.intervals.get(name, [])
        if self.cuda:
            torch.cuda.synchronize()
            return [start.elapsed_time(end) / 1000.0 for start, end in pairs]
        return [end - start for start, end in pairs]


def seed_step(seed: int, step: int) -> None:
    """The same random state (dropout masks) for every variant's ``step``-th step."""
    torch.manual_seed(seed * 100_003 + step)


def to_device(batch: dict, device: torch.device) -> dict:
    """The batch's tensors on ``device`` (lists of text stay)."""
    if device.type == "cpu":
        return batch
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
