"""Did a run keep to its time budget? Issue 39's two checks of a `trainer.max_time` run, read from its folder:

    .venv/bin/python scripts/budget_check.py outputs/mt/runs/<time> [more run folders]

- the learning rate (every `lr-*` column of csv/metrics.csv) never rises after its peak, the end of the warm-up;
- training stopped within --slack seconds (15) of the budget: the time budget's "training stops at step ..." line in
  train.log gives the seconds used, summary.json the budget's end (fit_seconds) and the run's settings.

Prints one line per run and exits 1 if any run fails a check.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

import yaml

STOP_LINE = re.compile(r"training stops at step (\d+) \(epoch (\d+)\), (\d+) s of (\d+) s used")


def learning_rates(run: Path) -> list[float]:
    with (run / "csv" / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    columns = [name for name in (rows[0] if rows else {}) if name.startswith("lr-")]
    if not columns:
        raise SystemExit(f"{run}: csv/metrics.csv has no lr-* column: train with logger=csv (or a logger list with it)")
    return [float(row[columns[0]]) for row in rows if row[columns[0]]]


def largest_rise_after_peak(rates: list[float]) -> float:
    """How far the rate ever climbs back after its peak (0: it never does)."""
    peak = max(range(len(rates)), key=rates.__getitem__)
    rise, lowest = 0.0, rates[peak]
    for rate in rates[peak:]:
        lowest = min(lowest, rate)
        rise = max(rise, rate - lowest)
    return rise


def check(run: Path, slack: float) -> tuple[bool, str]:
    rates = learning_rates(run)
    rise = largest_rise_after_peak(rates)
    log = (run / "train.log").read_text(errors="replace") if (run / "train.log").is_file() else ""
    stops = STOP_LINE.findall(log)
    budget = yaml.safe_load((run / "config_resolved.yaml").read_text())["trainer"].get("max_time")
    if not stops:
        return False, f"{run}: no time-budget stop in train.log (trainer.max_time {budget}): did it end on max_epochs?"
    step, epoch, used, total = (int(value) for value in stops[-1])
    summary = run / "summary.json"
    fit = json.loads(summary.read_text()).get("fit_seconds") if summary.is_file() else None
    ok = rise == 0.0 and total - used <= slack
    verdict = "ok" if ok else "FAILS"
    return ok, (f"{run}: {verdict}: lr peak {max(rates):.3g}, last {rates[-1]:.3g}, largest rise after the peak "
                f"{rise:.3g}; training stopped at step {step} (epoch {epoch}), {used} s of {total} s "
                f"({total - used} s left, at most {slack:g}); fit {fit} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--slack", type=float, default=15.0, help="seconds of the budget training may leave unused")
    args = parser.parse_args()
    results = [check(run, args.slack) for run in args.runs]
    for _, line in results:
        print(line)
    sys.exit(0 if all(ok for ok, _ in results) else 1)


if __name__ == "__main__":
    main()
