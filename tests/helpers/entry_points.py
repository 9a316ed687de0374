"""The real entry points, as a user runs them: train.py, eval.py, predict.py and the scripts in subprocesses, and
what their runs leave."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT


def run(script: str, *overrides: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``script`` (train.py, eval.py, predict.py or one in scripts/) with these arguments, which must succeed."""
    result = subprocess.run(
        [sys.executable, script, *overrides], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def assert_same_metrics(evaluated: dict, tested: dict) -> None:
    """eval.py's test metrics of a checkpoint are the ones train.py's test wrote for it (the same names and values)."""
    assert set(evaluated) == set(tested)
    for name, value in tested.items():
        assert math.isclose(evaluated[name], value, rel_tol=1e-5, abs_tol=1e-6), (name, evaluated[name], value)


def pngs(folder: Path) -> list[Path]:
    """Every PNG under ``folder`` (attention plots), sorted."""
    return sorted(folder.rglob("*.png"))


def run_failing(*overrides: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """train.py that is expected to exit non-zero."""
    result = subprocess.run(
        [sys.executable, "train.py", *overrides], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode != 0, f"train.py should have failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return result
