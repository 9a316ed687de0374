"""scripts/ run as a user runs them."""

from __future__ import annotations

import re

from tests.test_entry_points import TINY_DATES, run


def test_profile_step_prints_throughput_and_the_top_operators():
    overrides = [o for o in TINY_DATES if not o.startswith("trainer.")]
    result = run("scripts/profile_step.py", *overrides, "--warmup", "1", "--steps", "3", "--top", "5")
    match = re.search(r"(\d+) target tokens/s\s+([\d.]+) ms/step", result.stdout)
    assert match and int(match.group(1)) > 0 and float(match.group(2)) > 0, result.stdout
    assert "Self CPU" in result.stdout  # the profiler's table
