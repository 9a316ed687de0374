"""Screenshots of TensorBoard pages in headless Chromium, to check what a reviewer sees offline.

    .venv/bin/python scripts/tensorboard_screenshot.py <logdir> [--out tensorboard.png] [--page hparams]
        [--page timeseries ...] [--window-size 1600,900] [--wait 60] [--budget-ms 20000]

Starts ``tensorboard --logdir <logdir>`` on localhost at a free port, waits until it lists the runs, takes
one screenshot per ``--page`` (the part after ``#`` in TensorBoard's address: hparams, timeseries, scalars,
images, text), and stops TensorBoard. With several pages each file is ``<out stem>_<page>.png``. Needs
Chromium (``apt-get install -y chromium``); nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def wait_for_runs(port: int, server: subprocess.Popen, seconds: float) -> list[str]:
    """The runs TensorBoard lists once it has loaded them (the list stops growing), within ``seconds``."""
    deadline, runs, stable = time.monotonic() + seconds, [], 0
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"tensorboard exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(f"http://localhost:{port}/data/runs", timeout=5) as response:
                latest = json.load(response)
        except OSError:
            latest = []
        stable = stable + 1 if latest and latest == runs else 0
        runs = latest
        if stable >= 3:  # the same runs three polls in a row: loaded
            return runs
        time.sleep(1)
    raise SystemExit(f"tensorboard listed no runs within {seconds:.0f} s (runs so far: {runs})")


@contextlib.contextmanager
def running_tensorboard(logdir: Path, wait: float = 60) -> Iterator[tuple[int, list[str]]]:
    """TensorBoard serving ``logdir`` on localhost at a free port while the block runs: yields the port and
    the runs it lists (waiting up to ``wait`` seconds for them); stopped afterwards."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port), "--host", "localhost"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        yield port, wait_for_runs(port, server, wait)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def screenshot(browser: str, url: str, out: Path, window_size: str, budget_ms: int) -> None:
    """One headless Chromium screenshot of ``url``; ``budget_ms`` of virtual time lets the page load its data."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--window-size={window_size}", f"--virtual-time-budget={budget_ms}", f"--screenshot={out}", url],
            check=True, capture_output=True, timeout=120,
        )
    if not out.is_file():
        raise SystemExit(f"{browser} wrote no screenshot of {url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", type=Path, help="the folder TensorBoard reads (a run or a sweep folder)")
    parser.add_argument("--out", type=Path, default=Path("tensorboard.png"), help="the PNG to write")
    parser.add_argument("--page", action="append", help="the page after # (default: hparams); repeat for more")
    parser.add_argument("--window-size", default="1600,900", help="width,height in pixels")
    parser.add_argument("--wait", type=float, default=60, help="seconds to wait for TensorBoard to list runs")
    parser.add_argument("--budget-ms", type=int, default=20000, help="virtual time the page gets to load")
    args = parser.parse_args()
    browser = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if browser is None:
        raise SystemExit("no Chromium found: apt-get install -y chromium")
    pages = args.page or ["hparams"]
    with running_tensorboard(args.logdir, args.wait) as (port, runs):
        print(f"tensorboard on localhost:{port}, runs: {', '.join(runs)}", file=sys.stderr)
        for page in pages:
            out = args.out if len(pages) == 1 else args.out.with_name(f"{args.out.stem}_{page}{args.out.suffix}")
            screenshot(browser, f"http://localhost:{port}/#{page}", out, args.window_size, args.budget_ms)
            print(f"wrote {out}")


if __name__ == "__main__":
    main()
