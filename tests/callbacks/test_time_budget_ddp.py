"""DDP under a time budget: 2 CPU processes (gloo) whose clocks disagree follow one clock, rank 0's.

The test starts this file as a script (``python -m tests.callbacks.test_time_budget_ddp OUT``); Lightning starts it
again as rank 1, and each rank writes what it did to ``OUT/rank<r>.json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import lightning.pytorch.callbacks.timer as timer_module
import pytest
from lightning.pytorch.strategies import DDPStrategy

from tests.helpers.paths import ROOT
from tests.helpers.time_budget import (
    WARMUP,
    ClockedRegression,
    FakeClock,
    RecordingBudget,
    data,
    never_rises,
    noisy_pace,
    trainer,
)

pytestmark = pytest.mark.slow  # a two-process DDP run: make test-slow (CI runs both tiers)

SKEW = (1.0, 2.5)  # rank 1's clock runs 2.5 times as fast: alone, it would stop far sooner
BUDGET = 600


def main(out: Path) -> None:
    """Train on this rank with its skewed fake clock and write its rates and stop."""
    clock = FakeClock()
    timer_module.time = clock
    step_seconds, validation_seconds = noisy_pace(seed=0)
    model = ClockedRegression(
        clock, lambda epoch, batch, rank: SKEW[rank] * step_seconds(epoch, batch, rank),
        lambda epoch: validation_seconds(epoch),
    )
    budget = RecordingBudget()
    strategy = DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30))
    run = trainer({"seconds": BUDGET}, callbacks=[budget], strategy=strategy, devices=2)
    run.fit(model, data(40), data(8))
    scheduler = run.lr_scheduler_configs[0].scheduler
    result = {
        "validations": budget.validations, "steps": run.global_step, "rates": model.rates,
        "end": scheduler.lr_lambdas[0].progress(scheduler.last_epoch), "clock": clock.now,
    }
    (out / f"rank{run.global_rank}.json").write_text(json.dumps(result))


def test_ranks_with_skewed_clocks_share_one_schedule_and_stop(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.callbacks.test_time_budget_ddp", str(tmp_path)], cwd=ROOT, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:  # hung ranks: stop both (rank 1 is in the same session)
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, output[-5000:]
    zero, one = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1))
    assert zero["validations"] == one["validations"] and zero["steps"] == one["steps"]
    assert zero["rates"] == one["rates"] and zero["end"] == one["end"] == 1.0
    assert zero["validations"][-1][0] == zero["steps"]  # the final weights were validated
    assert never_rises(zero["rates"][WARMUP:])
    assert one["clock"] > BUDGET > zero["clock"]  # rank 1's clock alone would have stopped it


if __name__ == "__main__":
    main(Path(sys.argv[1]))
