"""What a change buys per epoch: train variants of one config side by side, each stopped after N validations.

    .venv/bin/python scripts/epoch_ablation.py --epochs 3 --parallel 2 \
        before="model.init=pytorch data.loader.batch_size=64 data.loader.max_tokens=null" \
        xavier="data.loader.batch_size=64 data.loader.max_tokens=null"

Each variant is ``NAME="override override ..."`` on top of the default config (``--common`` adds overrides to
all). A variant runs ``train.py`` with its full schedule (so epoch 3 of a 12-epoch cosine is what it is in the
full run) and is stopped once its CSV log holds ``--epochs`` validations; the table then gives the monitored
metric after each epoch and the validation loss after the last. Runs side by side get one thread each: compare
what they learned per epoch, not their speed. The per-epoch table of the default MT run in docs/results.md came
from this script.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def validations(metrics_csv: Path, metric: str) -> list[dict]:
    """The rows of a run's CSV log that carry a validation value of ``metric``."""
    if not metrics_csv.is_file():
        return []
    with metrics_csv.open(newline="") as f:
        return [row for row in csv.DictReader(f) if row.get(metric)]


def run_until(name: str, overrides: list[str], folder: Path, epochs: int, metric: str) -> list[dict]:
    """Train one variant until ``epochs`` validations are logged (or it ends); its validation rows."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "train.py", "logger=csv", "run_test=false", f"hydra.run.dir={folder}", *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with (folder / "stdout.log").open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        while process.poll() is None and len(validations(folder / "csv" / "metrics.csv", metric)) < epochs:
            time.sleep(2)
        if process.poll() is None:
            process.terminate()  # Attend's preemption handler stops after the current step
            process.wait(timeout=120)
    rows = validations(folder / "csv" / "metrics.csv", metric)[:epochs]
    if not rows:
        raise SystemExit(f"{name}: no validation was logged; see {folder / 'stdout.log'}")
    return rows


def table(results: dict[str, list[dict]], metric: str) -> str:
    """A Markdown table: the metric after each epoch and the validation loss after the last."""
    lines = [f"| variant | {metric} after each epoch | val/loss after the last |", "| --- | --- | --- |"]
    for name, rows in results.items():
        values = " / ".join(f"{float(row[metric]):.2f}" for row in rows)
        lines.append(f"| {name} | {values} | {float(rows[-1]['val/loss']):.3f} |")
    return "\n".join(lines)


def parse_variant(item: str) -> tuple[str, str]:
    """``NAME=overrides`` -> (NAME, overrides); a bare NAME has none (the default config)."""
    name, _, overrides = item.partition("=")
    if not name or " " in name:
        raise SystemExit(f"a variant is NAME=\"override ...\", got {item!r}")
    return name, overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", help='NAME="override override ..."')
    parser.add_argument("--epochs", type=int, default=3, help="validations to wait for (3)")
    parser.add_argument("--parallel", type=int, default=2, help="variants trained at the same time (2)")
    parser.add_argument("--metric", default="val/bleu", help="the metric to tabulate (val/bleu)")
    parser.add_argument("--common", default="", help="overrides added to every variant")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "epoch_ablation", help="run folders")
    args = parser.parse_args()
    variants = dict(parse_variant(item) for item in args.variants)
    pending, results = list(variants.items()), {}
    while pending:
        batch, pending = pending[: args.parallel], pending[args.parallel :]
        with ThreadPoolExecutor(len(batch)) as pool:
            futures = {
                name: pool.submit(
                    run_until, name, args.common.split() + overrides.split(), args.out / name, args.epochs, args.metric
                )
                for name, overrides in batch
            }
            results.update({name: future.result() for name, future in futures.items()})
    print(table({name: results[name] for name in variants}, args.metric))


if __name__ == "__main__":
    main()
