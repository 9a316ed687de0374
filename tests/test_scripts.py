"""scripts/ run as a user runs them."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT
from tests.test_entry_points import TINY_DATES, run


def test_profile_step_prints_throughput_and_the_top_operators():
    overrides = [o for o in TINY_DATES if not o.startswith("trainer.")]
    result = run("scripts/profile_step.py", *overrides, "--warmup", "1", "--steps", "3", "--top", "5")
    match = re.search(r"(\d+) target tokens/s\s+([\d.]+) ms/step", result.stdout)
    assert match and int(match.group(1)) > 0 and float(match.group(2)) > 0, result.stdout
    assert "Self CPU" in result.stdout  # the profiler's table


def test_profile_step_cycles_a_split_shorter_than_the_steps_asked_for():
    overrides = [o for o in TINY_DATES if not o.startswith("trainer.")] + ["data.source.n_train=200"]
    result = run("scripts/profile_step.py", *overrides, "--warmup", "2", "--steps", "8", "--top", "0")
    assert "ms/step" in result.stdout


def test_profile_step_names_a_bad_override_and_a_missing_value():
    for overrides, expected in (
        (["attention=nope"], "Could not find 'attention/nope'"),
        (["data=parallel_text"], "data.source.root"),
    ):
        result = subprocess.run(
            [sys.executable, "scripts/profile_step.py", *overrides], cwd=ROOT, capture_output=True, text=True,
            timeout=120,
        )
        assert result.returncode != 0
        assert result.stderr.startswith("profile_step.py: ") and expected in result.stderr
        assert "Traceback" not in result.stderr


def test_attention_memory_benchmark_prints_both_modes():
    result = run("scripts/bench_attention_memory.py", "--batch", "2", "--steps", "8", "--frames", "50", "--hidden",
                 "16", "--max-elements", "1000")
    assert "12,800 elements" in result.stdout
    assert re.search(r"at once: +[\d.]+ s forward \+ backward, peak memory \+[\d,]+ MB", result.stdout)
    assert re.search(r"chunks of <= 1,000: +[\d.]+ s", result.stdout), result.stdout
