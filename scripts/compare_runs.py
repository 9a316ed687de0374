"""Compare finished runs: a table (Markdown and CSV), a bar chart of the main metric and a grid of
the same example's attention plot in every run.

    .venv/bin/python scripts/compare_runs.py FOLDER [FOLDER ...] [--metrics test/exact test/bleu]
        [--main-metric test/bleu] [--example 0] [--out PREFIX] [--doc docs/results.md --section NAME]

Each FOLDER is a run folder or a sweep folder (Hydra multirun) searched for the ``summary.json`` that
train.py writes at the end of every run. The columns name the config groups whose option differs
between runs (attention, decoder, ...) and the command-line values that differ (a learning rate), then
the metrics (default: every test metric the runs share), the training time and the parameter count.
Written: ``<PREFIX>.md``, ``<PREFIX>.csv``,
``<PREFIX>_<metric>.png`` (bars of the main metric: default the test value of the metric the runs
monitored) and ``<PREFIX>_attention.png`` (example ``--example`` of each run's last validation plots).
PREFIX defaults to ``<FOLDER>/comparison`` for one folder. With ``--doc FILE`` (``make compare`` gives
docs/results.md; ``--readme`` is the option's older name) the table replaces the lines between
``<!-- compare:NAME -->`` and ``<!-- /compare:NAME -->`` in FILE.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402 (after choosing the file backend)
import matplotlib.pyplot as plt  # noqa: E402

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


def varying_columns(runs: list[dict]) -> list[str]:
    """The config groups whose option differs between runs, then the command-line keys whose value differs
    (a learning-rate sweep's lr); when nothing differs, the first group there is (the task)."""
    present = [g for g in GROUPS if any(g in run.get("choices", {}) for run in runs)]
    groups = [g for g in present if len({run.get("choices", {}).get(g) for run in runs}) > 1]
    keys = sorted({key for run in runs for key in run.get("overrides", {})} - set(GROUPS))
    overrides = [key for key in keys if len({run.get("overrides", {}).get(key) for run in runs}) > 1]
    return groups + overrides or present[:1]


def shared_metrics(runs: list[dict]) -> list[str]:
    names = set.intersection(*(set(run["test"]) for run in runs))
    return sorted(names - {"test/loss"}) + (["test/loss"] if "test/loss" in names else [])


def run_settings(run: dict, columns: list[str]) -> list[str]:
    """A run's option of each config group, or value of each override, in ``columns``."""
    choices, overrides = run.get("choices", {}), run.get("overrides", {})
    return [str(choices.get(c, overrides.get(c, ""))) for c in columns]


def table_rows(runs: list[dict], columns: list[str], metrics: list[str]) -> tuple[list[str], list[list[str]]]:
    header = [*columns, *metrics, "training time", "epochs", "parameters"]
    rows = []
    for run in runs:
        values = [format_metric(run["test"].get(name)) for name in metrics]
        minutes, seconds = divmod(round(run["fit_seconds"]), 60)
        rows.append([
            *run_settings(run, columns), *values, f"{minutes} min {seconds:02d} s",
            str(run["epochs"]), f"{run['parameters'] / 1e6:.2f} M",
        ])
    return header, rows


def format_metric(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def replace_section(doc: Path, section: str, text: str) -> None:
    """Put ``text`` between the section's markers in ``doc``; the markers must be there already."""
    start, end = f"<!-- compare:{section} -->", f"<!-- /compare:{section} -->"
    content = doc.read_text(encoding="utf-8")
    if start not in content or end not in content:
        raise SystemExit(f"compare_runs: {doc} has no '{start}' ... '{end}' markers: add them where the table goes")
    before, rest = content.split(start, 1)
    after = rest.split(end, 1)[1]
    doc.write_text(f"{before}{start}\n{text}{end}{after}", encoding="utf-8")


def run_labels(runs: list[dict], columns: list[str]) -> list[str]:
    """A short name per run: its varying options and values (the folder name when they say nothing)."""
    labels = [" ".join(run_settings(run, columns)).strip() for run in runs]
    if len(set(labels)) < len(labels):  # the same options twice (seeds, a resumed run): add the folder
        labels = [f"{label} ({Path(run['folder']).name})".strip() for label, run in zip(labels, runs, strict=True)]
    return labels


def main_metric(runs: list[dict], metrics: list[str]) -> str:
    """The test value of the metric the runs monitored (val/bleu -> test/bleu), else the first metric shown."""
    monitored = runs[0].get("monitor", {}).get("metric") or ""
    candidate = "test/" + monitored.split("/", 1)[-1]
    return candidate if all(candidate in run["test"] for run in runs) else metrics[0]


def metric_bars(labels: list[str], values: list[float | None], metric: str):
    """Horizontal bars, one per run, of ``metric``; a run without it gets no bar."""
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(labels) + 1.2))
    heights = [0.0 if v is None else v for v in values]
    bars = ax.barh(range(len(labels)), heights, color="tab:blue")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.bar_label(bars, labels=[format_metric(v) for v in values], padding=3)
    ax.set_xlabel(metric)
    ax.margins(x=0.15)
    fig.tight_layout()
    return fig


def attention_images(runs: list[dict], example: int) -> list[Path | None]:
    """Per run, ``example_<example>.png`` of its last validation epoch's attention plots (None: none drawn)."""
    images = []
    for run in runs:
        epochs = sorted((Path(run["folder"]) / "attention").glob("epoch_*"))
        path = epochs[-1] / f"example_{example}.png" if epochs else None
        images.append(path if path is not None and path.is_file() else None)
    return images


def image_grid(images: list[Path | None], titles: list[str], columns: int = 3):
    """The images side by side, titled; a missing one says so."""
    rows = -(-len(images) // columns)
    columns = min(columns, len(images))
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 4 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, path, title in zip(axes.flat, images, titles, strict=False):
        ax.set_title(title, fontsize=10)
        if path is None:
            ax.text(0.5, 0.5, "no attention plot", ha="center", va="center", transform=ax.transAxes)
        else:
            ax.imshow(mpimg.imread(path))
    fig.tight_layout()
    return fig


def write_outputs(prefix: Path, header: list[str], rows: list[list[str]], text: str, bars, grid) -> list[Path]:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    written = [prefix.with_name(prefix.name + ".md"), prefix.with_name(prefix.name + ".csv")]
    written[0].write_text(text, encoding="utf-8")
    with written[1].open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    for figure, suffix in ((bars, bars.get_axes()[0].get_xlabel().replace("/", "_")), (grid, "attention")):
        written.append(prefix.with_name(f"{prefix.name}_{suffix}.png"))
        figure.savefig(written[-1], dpi=100)
        plt.close(figure)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--metrics", nargs="*", help="test metrics to show (default: all the runs share)")
    parser.add_argument("--main-metric", help="the metric of the bar chart (default: the monitored one, on test)")
    parser.add_argument("--example", type=int, default=0, help="which validation example the attention grid shows")
    parser.add_argument("--out", type=Path, help="output prefix (default: <FOLDER>/comparison for one folder)")
    parser.add_argument(
        "--doc", "--readme", dest="doc", type=Path, metavar="FILE",
        help="a Markdown file whose marked section receives the table (make compare: docs/results.md)",
    )
    parser.add_argument("--section", default="runs", help="the marker name in --doc")
    args = parser.parse_args(argv)

    runs = find_runs(args.folders)
    metrics = args.metrics or shared_metrics(runs)
    columns = varying_columns(runs)
    header, rows = table_rows(runs, columns, metrics)
    text = markdown(header, rows)
    sys.stdout.write(text)
    prefix = args.out or (args.folders[0] / "comparison" if len(args.folders) == 1 else None)
    if prefix is not None:
        labels = run_labels(runs, columns)
        metric = args.main_metric or main_metric(runs, metrics)
        bars = metric_bars(labels, [run["test"].get(metric) for run in runs], metric)
        grid = image_grid(attention_images(runs, args.example), labels)
        for path in write_outputs(prefix, header, rows, text, bars, grid):
            print(f"wrote {path}", file=sys.stderr)  # stdout holds the table alone
    if args.doc:
        replace_section(args.doc, args.section, text)


if __name__ == "__main__":
    main()
