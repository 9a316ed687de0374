"""Training speed of each task's default model at one thread, two threads and two one-thread processes, on the
machine as it is and with one core kept busy by another process (the table of docs/performance.md, Threads).

    .venv/bin/python scripts/thread_table.py                     # mt, caption and asr, quiet and busy
    .venv/bin/python scripts/thread_table.py --tasks mt --steps 20 --conditions quiet

Each figure is scripts/profile_step.py's (non-padding target tokens a second over timed training steps on real
batches, no Lightning loop) run in its own process. "2 processes x 1 thread" runs two such processes at once and
adds their rates: what two one-thread DDP ranks could reach at best (DDP also waits at each step's all-reduce for
the slower rank). "busy" starts `python3 -c 'while True: pass'` for the measurement, as another user's job on a
shared machine would.
The data of each task must be prepared once first (a first start of train.py, or this script's own first run).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATE = re.compile(r"^(\d+) target tokens/s", re.MULTILINE)


def rate(task: str, threads: int, steps: int, overrides: list[str]) -> subprocess.Popen:
    """A profile_step.py process of ``task`` at ``threads`` threads (started, not waited for)."""
    command = [sys.executable, str(ROOT / "scripts" / "profile_step.py"), f"task={task}", f"threads={threads}",
               *overrides, "--top", "0", "--steps", str(steps), "--warmup", "5"]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": str(threads)})


def tokens_per_second(process: subprocess.Popen) -> float:
    out, err = process.communicate(timeout=1800)
    found = RATE.search(out)
    if process.returncode != 0 or found is None:
        sys.exit(f"thread_table.py: profile_step.py failed:\n{err[-2000:]}")
    return float(found.group(1))


@contextmanager
def condition(name: str):
    """Nothing for "quiet"; one process spinning on a core for "busy"."""
    spinner = None
    if name == "busy":
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["mt", "caption", "asr"])
    parser.add_argument("--conditions", nargs="+", default=["quiet", "busy"], choices=["quiet", "busy"])
    parser.add_argument("--steps", type=int, default=30, help="timed steps of each measurement")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every task, as for train.py")
    args = parser.parse_args()
    for task in args.tasks:  # a first start prepares the task's data (and features) before anything is timed
        tokens_per_second(rate(task, 1, 2, args.overrides))
    print("| task | machine | 1 thread | 2 threads | 2 processes x 1 thread |")
    print("| --- | --- | ---: | ---: | ---: |")
    for task in args.tasks:
        for name in args.conditions:
            with condition(name):
                one = tokens_per_second(rate(task, 1, args.steps, args.overrides))
                two = tokens_per_second(rate(task, 2, args.steps, args.overrides))
                pair = [rate(task, 1, args.steps, args.overrides) for _ in range(2)]
                both = sum(tokens_per_second(process) for process in pair)
            print(f"| {task} | {name} | {one:,.0f} | {two:,.0f} | {both:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
