"""The thread count measured while training (attend.callbacks.ThreadsThatFit), on a simulated machine whose steps
take as long as a table of seconds per token says for the current thread count, then on one that became busy."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import attend.callbacks.threads_that_fit as threads_module
from attend.callbacks import ThreadsThatFit
from tests.helpers.paths import ROOT


class Machine:
    """A clock that advances, at each step, by tokens x the seconds per token of the current thread count."""

    def __init__(self, cost: dict[int, float]) -> None:
        self.cost, self.now = cost, 0.0

    def perf_counter(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def step(self, tokens: int) -> None:
        self.now += tokens * self.cost[torch.get_num_threads()]


class Module:
    def __init__(self) -> None:
        self.logged: list[float] = []

    def log(self, name, value, **kwargs) -> None:
        self.logged.append(value)


@pytest.fixture
def machine(monkeypatch):
    machine = Machine({1: 1.0, 2: 0.5})
    monkeypatch.setattr(threads_module.time, "perf_counter", machine.perf_counter)
    monkeypatch.setattr(threads_module.time, "monotonic", machine.monotonic)
    before = torch.get_num_threads()
    yield machine
    torch.set_num_threads(before)


def started(every_seconds: float = 1000.0) -> ThreadsThatFit:
    """The callback as on_train_start leaves it on a 2-core CPU run with a budget."""
    callback = ThreadsThatFit(probe_steps=4, every_seconds=every_seconds, skip_steps=2)
    callback.active, callback.candidates, callback.chosen, callback.initial = True, [1, 2], 2, 2
    callback.on_train_epoch_start(None, None)
    return callback


def train(callback: ThreadsThatFit, machine: Machine, module: Module, steps: int, tokens: int = 10) -> None:
    for index in range(steps):
        callback.on_train_batch_start(None, module, {}, index)
        machine.step(tokens)
        callback.on_train_batch_end(None, module, None, {"num_target_tokens": torch.tensor(tokens)}, index)


def test_it_measures_both_counts_and_trains_on_the_faster(machine):
    callback, module = started(), Module()
    train(callback, machine, module, 2 + 8 + 20)  # skipped steps, the measurement (4 steps a count), then training
    assert callback.chosen == 2 and callback.measurements == 1
    assert sorted(len(costs) for costs in callback.costs.values()) == [4, 4]
    assert module.logged[-20:] == [2.0] * 20 and 1.0 in module.logged  # both were tried, then 2 only
    torch.set_num_threads(1)
    callback.on_train_end(None, module)
    assert torch.get_num_threads() == callback.initial  # a multirun's next job starts from the machine's count


def test_a_machine_that_becomes_busy_is_measured_again_at_once_and_gets_one_thread(machine):
    callback, module = started(), Module()
    train(callback, machine, module, 2 + 8 + 10)
    machine.cost = {1: 1.0, 2: 3.0}  # another process now keeps a core busy: two threads wait on each other
    train(callback, machine, module, 4 + 8 + 10)  # 4 slow steps show the stall, then a measurement
    assert callback.chosen == 1 and callback.measurements == 2 and module.logged[-10:] == [1.0] * 10


def test_a_stall_that_measuring_again_does_not_confirm_is_answered_in_the_log(machine, caplog):
    """Slow steps at two threads start a measurement; when two threads still win (the steps were slow for another
    reason: longer utterances, a validation), the log says so, so that "measuring again" never goes unanswered."""
    callback, module = started(), Module()
    train(callback, machine, module, 2 + 8 + 10)
    machine.cost = {1: 2.0, 2: 1.0}  # both counts slower, two threads still the faster
    with caplog.at_level("INFO", logger=threads_module.log.name):
        train(callback, machine, module, 4 + 8 + 2)
    said = [record.getMessage() for record in caplog.records if record.levelname == "INFO"]
    assert said[0].startswith("threads: steps at 2 thread(s) are 2.0 times slower than measured; measuring again")
    assert said[1] == "threads: 2 (measured 1: 0 tok/s, 2: 1 tok/s)" and len(said) == 2
    assert callback.chosen == 2 and callback.measurements == 2


def test_it_measures_again_after_every_seconds_and_goes_back_when_the_machine_is_quiet(machine):
    callback, module = started(every_seconds=100.0), Module()
    machine.cost = {1: 1.0, 2: 3.0}
    train(callback, machine, module, 2 + 8 + 5)
    assert callback.chosen == 1
    machine.cost = {1: 1.0, 2: 0.5}  # quiet again: no stall to see at one thread; the clock brings the next look
    train(callback, machine, module, 10 + 8 + 3)  # 10 steps of 10 s: 100 s
    assert callback.chosen == 2 and callback.measurements == 2


def test_a_fixed_count_or_no_budget_leaves_the_threads_alone(machine):
    class Trainer:
        world_size, callbacks = 1, []

        class accelerator:  # noqa: N801 - a stand-in for the CPU accelerator instance
            pass

    for callback in (ThreadsThatFit(threads=3), ThreadsThatFit(threads="auto")):
        callback.on_train_start(Trainer(), None)  # the second: no Timer, no budget
        assert not callback.active


@pytest.mark.parametrize("options, message", [
    ({"probe_steps": 3}, "probe_steps must be an even number"),
    ({"stall_ratio": 1.0}, "stall_ratio above 1"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        ThreadsThatFit(**options)


@pytest.mark.slow  # train.py end to end (about 20 s): the slow tier; the units above run in make test
def test_a_budgeted_cpu_run_of_train_py_measures_and_logs_its_threads(tmp_path):
    """Two threads allowed (the tests otherwise run everything on one): the run measures and logs train/threads."""
    import csv
    import os

    overrides = ["experiment=dates", "data.source.n_train=2000", "data.source.n_val=32", "data.source.n_test=32",
                 "encoder.embedding_dim=16", "encoder.hidden_size=32", "decoder.embedding_dim=16",
                 "decoder.hidden_size=64", "trainer.max_time=00:00:00:40", "trainer.max_epochs=1",
                 "trainer.limit_train_batches=30", "trainer.limit_val_batches=1", "logger=csv", "run_test=false",
                 "trainer.log_every_n_steps=1", "callbacks.attention_plots=null", "callbacks.threads.skip_steps=2",
                 "callbacks.threads.probe_steps=4", f"hydra.run.dir={tmp_path}"]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "train.py", *overrides], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "threads: " in done.stdout + done.stderr and "tok/s" in done.stdout + done.stderr
    with (tmp_path / "csv" / "metrics.csv").open() as handle:
        counts = {float(row["train/threads"]) for row in csv.DictReader(handle) if row.get("train/threads")}
    assert counts == {1.0, 2.0}  # both measured
