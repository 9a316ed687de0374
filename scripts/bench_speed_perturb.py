"""What speed perturbation costs at start-up: the data of `task=asr` (Asterisk English) prepared with and without
it, on an empty cache (first start) and again from that cache (cached start), each in a fresh process.

    .venv/bin/python scripts/bench_speed_perturb.py                  # task=asr's data, speeds 0.9 / 1.0 / 1.1
    .venv/bin/python scripts/bench_speed_perturb.py data=french      # any speech data config (Hydra overrides)

Prints seconds to a set-up data module (records, encoded and speed-perturbed stores) and the store's size on disk
for each case. The figures of docs/performance.md come from it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SETUP = """
import json, sys, time
start = time.perf_counter()
from attend.builder import build_datamodule
from attend.config.compose import compose_config
cfg = compose_config(sys.argv[1:])
datamodule = build_datamodule(cfg)
datamodule.prepare_data()
datamodule.setup("fit")
print(json.dumps({"seconds": time.perf_counter() - start, "train": len(datamodule.datasets["train"])}))
"""


def setup_once(cache: Path, overrides: list[str]) -> dict:
    """Seconds (imports included) to a set-up data module, in a fresh process."""
    command = [sys.executable, "-c", SETUP, "task=asr", f"paths.cache_dir={cache}", *overrides]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    if done.returncode != 0:
        raise SystemExit(f"setting up the data failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def size_mb(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every case, e.g. data=french")
    args = parser.parse_args()
    cases = {"without": ["data.modality.speed_perturb=null"], "speeds 0.9/1.0/1.1": []}
    print(f"{'case':<20} {'first start s':>14} {'cached start s':>15} {'store MB':>9}", flush=True)
    for name, extra in cases.items():
        with tempfile.TemporaryDirectory(prefix="attend-speed-") as cache:
            first = setup_once(Path(cache), [*args.overrides, *extra])
            again = setup_once(Path(cache), [*args.overrides, *extra])
            print(f"{name:<20} {first['seconds']:>14.1f} {again['seconds']:>15.1f} "
                  f"{size_mb(Path(cache) / 'store'):>9.1f}", flush=True)


if __name__ == "__main__":
    main()
