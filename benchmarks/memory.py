"""Peak memory of one thing at a time, each in a fresh process (its own high-water mark)."""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
import resource
import time
from collections.abc import Callable

import torch

PRELOAD = ["torch", "lightning", "benchmarks.variants", "benchmarks.attention_types"]


def in_subprocess(function: Callable, *args) -> dict:
    """Run ``function(*args, queue)`` in a fresh process and return what it puts on the queue.

    The process is forked from a fork server that has imported torch, Lightning and Attend but run
    nothing, so each starts in a second with a small heap; its peak is measured above its own start.
    """
    # large blocks are mmapped and go back to the system when freed, so the CPU peak is what was live at
    # once (glibc reads this when a process starts: the fork server and its children inherit it)
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    queue = context.Queue()
    process = context.Process(target=function, args=(*args, queue))
    process.start()
    while True:
        try:
            result = queue.get(timeout=1.0)
            break
        except queues.Empty:
            if not process.is_alive():
                raise RuntimeError(
                    f"the measuring process {function.__name__}{args[:1]} exited with code {process.exitcode} "
                    "without a result; its error is printed above"
                ) from None
    process.join()
    return result


class PeakMeter:
    """Peak memory above the level at ``start()``: ru_maxrss on the CPU, the allocator's peak on CUDA."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.baseline = 0.0

    def start(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.baseline = torch.cuda.memory_allocated()
        else:
            self.baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0

    def megabytes(self) -> float:
        """Peak since ``start()`` minus the level then, in MiB."""
        if self.cuda:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0  # Linux reports KiB
        return (peak - self.baseline) / 2**20


def timed(function: Callable[[], None], repeats: int, device: torch.device) -> list[float]:
    """Seconds of ``repeats`` calls of ``function``, each synchronised on a GPU."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times
