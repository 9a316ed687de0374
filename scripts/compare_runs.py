"""Compare finished runs: one row per run (its config choices, test metrics, training time), as Markdown and CSV.

    .venv/bin/python scripts/compare_runs.py FOLDER [FOLDER ...] [--metrics test/exact test/bleu]
                                             [--out comparison] [--readme README.md --section NAME]

Each FOLDER is a run folder or a sweep folder (Hydra multirun) searched for the ``summary.json`` that
train.py writes at the end of every run. The columns name the config groups whose option differs
between runs (attention, decoder, ...), then the metrics (default: every test metric the runs share),
the training time and the parameter count. ``--out`` writes ``<out>.md`` and ``<out>.csv``; with
``--readme`` the table replaces the lines between ``<!-- compare:NAME -->`` and ``<!-- /compare:NAME -->``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

GROUPS = ("task", "data", "encoder", "attention", "decoder", "experiment", "optim", "trainer")


def find_runs(folders: list[Path]) -> list[dict]:
    """Every run's summary under ``folders``, in folder order; the run folder is kept under "folder"."""
    runs = []
    for folder in folders:
        if not folder.exists():
            raise SystemExit(f"compare_runs: {folder} does not exist: give a run or a sweep folder")
        for path in sorted(folder.rglob("summary.json"), key=job_order):
            runs.append({**read_summary(path), "folder": str(path.parent)})
    if not runs:
        raise SystemExit(f"compare_runs: no summary.json under {', '.join(map(str, folders))}: did the runs finish?")
    return runs


def read_summary(path: Path) -> dict:
    """One run's summary; a file cut short (a run killed while writing it) stops with its name."""
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        summary = {"unreadable": str(error)}
    missing = [key for key in ("test", "fit_seconds", "epochs", "parameters") if key not in summary]
    if missing:
        raise SystemExit(
            f"compare_runs: {path} is not a summary train.py wrote (no {', '.join(missing)}): remove it or rerun"
        )
    return summary


def job_order(path: Path) -> list[tuple]:
    """Hydra numbers sweep jobs 0, 1, ..., 10: sort numerically, not as text, and named folders after them."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in path.parent.parts]


def varying_groups(runs: list[dict]) -> list[str]:
    """The config groups whose option is not the same in every run (all of GROUPS present if none differ)."""
    present = [g for g in GROUPS if any(g in run.get("choices", {}) for run in runs)]
    varying = [g for g in present if len({run.get("choices", {}).get(g) for run in runs}) > 1]
    return varying or present[:1]


def shared_metrics(runs: list[dict]) -> list[str]:
    names = set.intersection(*(set(run["test"]) for run in runs))
    return sorted(names - {"test/loss"}) + (["test/loss"] if "test/loss" in names else [])


def table_rows(runs: list[dict], groups: list[str], metrics: list[str]) -> tuple[list[str], list[list[str]]]:
    header = [*groups, *metrics, "training time", "epochs", "parameters"]
    rows = []
    for run in runs:
        choices = run.get("choices", {})
        values = [format_metric(run["test"].get(name)) for name in metrics]
        minutes, seconds = divmod(round(run["fit_seconds"]), 60)
        rows.append([
            *(str(choices.get(g, "")) for g in groups), *values, f"{minutes} min {seconds:02d} s",
            str(run["epochs"]), f"{run['parameters'] / 1e6:.2f} M",
        ])
    return header, rows


def format_metric(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def replace_section(readme: Path, section: str, text: str) -> None:
    """Put ``text`` between the section's markers in ``readme``; the markers must be there already."""
    start, end = f"<!-- compare:{section} -->", f"<!-- /compare:{section} -->"
    content = readme.read_text(encoding="utf-8")
    if start not in content or end not in content:
        raise SystemExit(f"compare_runs: {readme} has no '{start}' ... '{end}' markers: add them where the table goes")
    before, rest = content.split(start, 1)
    after = rest.split(end, 1)[1]
    readme.write_text(f"{before}{start}\n{text}{end}{after}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--metrics", nargs="*", help="test metrics to show (default: all the runs share)")
    parser.add_argument("--out", type=Path, help="write <out>.md and <out>.csv")
    parser.add_argument("--readme", type=Path, help="a Markdown file whose marked section receives the table")
    parser.add_argument("--section", default="runs", help="the marker name in --readme")
    args = parser.parse_args(argv)

    runs = find_runs(args.folders)
    metrics = args.metrics or shared_metrics(runs)
    header, rows = table_rows(runs, varying_groups(runs), metrics)
    text = markdown(header, rows)
    sys.stdout.write(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text, encoding="utf-8")
        with args.out.with_suffix(".csv").open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([header, *rows])
    if args.readme:
        replace_section(args.readme, args.section, text)


if __name__ == "__main__":
    main()
