"""The number of CPU threads that trains fastest on the machine as it is, measured while the run trains."""

from __future__ import annotations

import logging
import statistics
import time

import lightning as L
import torch
from lightning.pytorch.accelerators import CPUAccelerator

from attend.callbacks.time_budget import budget_seconds

log = logging.getLogger(__name__)


class ThreadsThatFit(L.Callback):
    """With ``threads: auto`` on a one-process CPU run with a time budget (``trainer.max_time``): measure the
    training steps at each candidate thread count (1, half the cores, all of them) and train on the fastest;
    measure again every ``every_seconds``, and at once when steps become ``stall_ratio`` times slower than the
    last measurement said (a core that became busy mid-run).

    Why measure: PyTorch's threads wait for each other at every parallel region, so when another process keeps
    one core busy, two threads run 2-4 times slower than one (docs/performance.md), while on a quiet machine two
    are faster. Which one wins depends on the model and on the machine at that moment.

    A measurement runs ``probe_steps`` steps at each count, in alternating pairs of steps (so a change of load
    during it falls on every count alike), and compares the median seconds per target token of each (a step's
    wall time, data loading included, over its non-padding target tokens: batches of other lengths compare
    fairly). Steps that span a validation are not counted. Runs without a time budget (fixed steps) keep
    PyTorch's default, so they stay bit for bit reproducible (the thread count can change float sums); so do
    GPU and multi-process runs.
    """

    def __init__(self, threads: int | str | None = "auto", probe_steps: int = 8, every_seconds: float = 120.0,
                 stall_ratio: float = 1.6, skip_steps: int = 5) -> None:
        if probe_steps < 2 or probe_steps % 2:
            raise ValueError(f"callbacks.threads.probe_steps must be an even number, 2 or more, got {probe_steps}")
        if every_seconds <= 0 or stall_ratio <= 1:
            raise ValueError("callbacks.threads: every_seconds must be above 0 and stall_ratio above 1, got "
                             f"{every_seconds} and {stall_ratio}")
        self.auto = threads == "auto"
        self.probe_steps, self.every_seconds, self.stall_ratio = probe_steps, every_seconds, stall_ratio
        self.skip_steps = skip_steps
        self.active = False
        self.candidates: list[int] = []
        self.chosen: int | None = None
        self.initial = torch.get_num_threads()  # the count a run starts from (PyTorch's default: the cores)
        self.chosen_cost: float | None = None  # seconds per target token of the chosen count when measured
        self.schedule: list[int] = []  # thread counts of the steps of the measurement under way
        self.costs: dict[int, list[float]] = {}
        self.recent: list[float] = []  # seconds per token of the latest steps at the chosen count
        self.measured_at = 0.0
        self.last: float | None = None
        self.steps_seen = 0
        self.measurements = 0
        self.after_stall = False  # the measurement under way was started by a stall (its result is then told)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.active = (self.auto and budget_seconds(trainer) is not None and trainer.world_size == 1
                       and isinstance(trainer.accelerator, CPUAccelerator))
        if not self.active:
            return
        cores = torch.get_num_threads()
        self.candidates = sorted({1, max(1, cores // 2), cores})
        if len(self.candidates) == 1:
            self.active = False  # one core: nothing to choose
            return
        self.chosen = self.initial = cores

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.active:  # the next job of a multirun in this process starts from the machine's count again
            torch.set_num_threads(self.initial)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.last = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.last = time.perf_counter()  # the next step's time is not to include the validation

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx) -> None:
        if not self.active:
            return
        if not self.schedule and self.due():
            self.start_measuring()
        threads = self.schedule[0] if self.schedule else self.chosen
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx) -> None:
        now = time.perf_counter()
        elapsed, self.last = (None if self.last is None else now - self.last), now
        if not self.active:
            return
        self.steps_seen += 1
        pl_module.log("train/threads", float(torch.get_num_threads()), on_step=True, on_epoch=False, batch_size=1)
        tokens = int(batch["num_target_tokens"]) if "num_target_tokens" in batch else 0
        if elapsed is None or tokens <= 0 or self.steps_seen <= self.skip_steps:
            return
        cost = elapsed / tokens
        if self.schedule:
            self.costs.setdefault(self.schedule.pop(0), []).append(cost)
            if not self.schedule:
                self.choose(pl_module)
        else:
            self.recent = (self.recent + [cost])[-self.probe_steps:]

    def due(self) -> bool:
        """Time to measure: never measured, ``every_seconds`` since the last time, or the steps have stalled."""
        if self.steps_seen < self.skip_steps:
            return False
        if self.chosen_cost is None or time.monotonic() - self.measured_at >= self.every_seconds:
            return True
        stalled = (len(self.recent) >= self.probe_steps
                   and statistics.median(self.recent) > self.stall_ratio * self.chosen_cost)
        if stalled:
            self.after_stall = True
            log.info("threads: steps at %d thread(s) are %.1f times slower than measured; measuring again",
                     self.chosen, statistics.median(self.recent) / self.chosen_cost)
        return stalled

    def start_measuring(self) -> None:
        pairs = [count for count in self.candidates for _ in range(2)]  # 1 1 2 2, then again
        self.schedule = pairs * (self.probe_steps // 2)
        self.costs = {}

    def choose(self, pl_module: L.LightningModule) -> None:
        medians = {count: statistics.median(costs) for count, costs in self.costs.items()}
        previous, self.chosen = self.chosen, min(medians, key=medians.get)
        self.chosen_cost = medians[self.chosen]
        self.measured_at, self.recent = time.monotonic(), []
        self.measurements += 1
        rates = ", ".join(f"{count}: {1 / cost:,.0f} tok/s" for count, cost in sorted(medians.items()))
        # the first result, a change and the answer to a "measuring again" are told; a routine look that changes
        # nothing is a debug line
        told = self.chosen != previous or self.measurements == 1 or self.after_stall
        log.log(logging.INFO if told else logging.DEBUG, "threads: %d (measured %s)", self.chosen, rates)
        self.after_stall = False
        torch.set_num_threads(self.chosen)
