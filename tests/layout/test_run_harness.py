"""The run harness, attend.run, holds the entry points and what surrounds them: a few short files, no class a config
names, and train() holds only the run (run_context what surrounds it)."""

from __future__ import annotations

import inspect
from pathlib import Path

import attend.run
from attend.run.train import train
from tests.helpers.paths import CONF


def test_the_run_harness_holds_only_the_entry_points_and_what_surrounds_them():
    files = sorted(Path(attend.run.__path__[0]).glob("*.py"))
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
    assert len(files) <= 7 and lines <= 500, (len(files), lines)


def test_no_config_names_a_class_in_the_run_harness():
    named = [str(path.relative_to(CONF)) for path in CONF.rglob("*.yaml") if "attend.run." in path.read_text()]
    assert not named, named


def test_train_fits_on_a_screen_and_names_no_sweeper_logger_or_signal():
    source = inspect.getsource(train)
    assert len(source.splitlines()) <= 40
    for word in ("wandb", "optuna", "signal", "sweep", "logger", "preempt"):
        assert word not in source.lower(), word
