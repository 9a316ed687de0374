"""The decoding explorer checked in headless Chromium: pages open offline, step through every output step, and show
predict.py's own attention weights; the local server answers a typed sentence in time.

    .venv/bin/python scripts/explorer_check.py --task mt=tests/fixtures/old_checkpoints/dates.ckpt='march 3 1999' \
        --task caption=tests/fixtures/old_checkpoints/shapes.ckpt=photo.png --task asr=best.ckpt=hello.wav \
        [--server outputs/.../best.ckpt='Guten Morgen.'] [--screenshots docs/]

For each ``--task name=checkpoint=input``: predict.py explore=true writes the input's page (the real command); the
page is opened from its file in Chromium (``--dump-dom``: nothing fetched) and timed, twice: the wall time of the
browser process and the page's own time to its first drawn step (``performance.now()``); then the page's play
control steps through every output step (``#tour``), the values each step put in the DOM are read back and compared
with the weights of predict.py's decode call (``model.decode(batch, model.test_search)``) for the same input.
``--server checkpoint=sentence``: the local server (explore.py's) answers the sentence over HTTP, timed. Prints one
line per figure; exits 1 if a page is slower than 2 s, a weight differs by more than 1e-6, or a step is missing.
Needs Chromium (``apt-get install -y chromium``, in the Makefile's DEB_PACKAGES).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
LIMIT_SECONDS, TOLERANCE = 2.0, 1e-6


def find_browser() -> str:
    browser = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if browser is None:
        raise SystemExit("no Chromium found: apt-get install -y chromium (make debs installs it)")
    return browser


def chromium(browser: str, url: str, *options: str, budget_ms: int = 5000) -> tuple[str, float]:
    """Headless Chromium on ``url`` with ``options`` (--dump-dom, --screenshot=...): its stdout and wall seconds."""
    with tempfile.TemporaryDirectory() as profile:
        start = time.perf_counter()
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", *options, url],
            capture_output=True, text=True, timeout=120,
        )
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed on {url}: {done.stderr[-2000:]}")
    return done.stdout, seconds


def page_url(page: Path, fragment: str = "") -> str:
    return page.resolve().as_uri() + (f"#{fragment}" if fragment else "")


def rendered(dom: str) -> dict:
    """What the page put in the DOM for its step: the step, the weights (and each head's), the top tokens' and the
    beam's numbers, and its own time to the first drawn step."""
    views: dict[str, list[float]] = {}
    for view, weight in re.findall(r'data-view="(\w+)" data-index="\d+" data-weight="([^"]+)"', dom):
        views.setdefault(view, []).append(float(weight))
    if "main" not in views:
        raise ValueError("the page drew no attention view")
    return {
        "step": int(re.search(r'id="where" data-step="(\d+)"', dom).group(1)),
        "weights": views.pop("main"),
        "heads": [views[f"head{h}"] for h in range(len(views))],
        "top": [float(p) for p in re.findall(r'data-prob="([^"]+)"', dom)],
        "beam": [float(s) for s in re.findall(r'data-score="([^"]+)"', dom)],
        "agrees": (lambda m: None if m is None else m.group(1) == "true")(re.search(r'data-agrees="(\w+)"', dom)),
        "rendered_ms": float(re.search(r'data-rendered-ms="([^"]+)"', dom).group(1)),
    }


def open_step(browser: str, page: Path, step: int, mode: str = "search") -> tuple[dict, float]:
    """The page opened at ``step`` of ``mode`` from its address (#mode=..&step=..): what it drew, and the wall time."""
    dom, seconds = chromium(browser, page_url(page, f"mode={mode}&step={step}"), "--dump-dom")
    return rendered(dom), seconds


def tour(browser: str, page: Path, steps: int, mode: str = "search") -> list[dict]:
    """The page's play control run through every step (#tour), each step's DOM values as the page read them back."""
    dom, _ = chromium(browser, page_url(page, f"tour&mode={mode}"), "--dump-dom", budget_ms=60 * steps + 3000)
    found = re.search(r'<pre id="tour">(.*?)</pre>', dom, re.S)
    if found is None or 'data-tour-done="true"' not in dom:
        raise ValueError(f"the tour of {page} did not finish")
    return json.loads(html.unescape(found.group(1)))


def screenshot(browser: str, page: Path, out: Path, fragment: str, size: str = "1100,800") -> None:
    """A PNG of the page at ``fragment`` (#step=3), in 256 colours: small enough to keep in docs/."""
    from PIL import Image

    chromium(browser, page_url(page, fragment), f"--screenshot={out.resolve()}", f"--window-size={size}")
    Image.open(out).convert("RGB").quantize(256).save(out, optimize=True)


def page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    return json.loads(re.search(r'type="application/json">(.*?)</script>', text, re.S).group(1))


def predict_page(checkpoint: str, source: str, folder: Path) -> Path:
    """predict.py explore=true on one input, as a user runs it: the path of its page."""
    subprocess.run(
        [sys.executable, "predict.py", f"ckpt_path={checkpoint}", f"inputs=[{source}]", "explore=true",
         "plots=false", f"hydra.run.dir={folder}"], cwd=ROOT, check=True, capture_output=True, timeout=300,
    )
    return folder / "explore" / "input_0.html"


def predicted_weights(checkpoint: str, source: str):
    """The weights (T, S) and per-head weights of predict.py's decode call for ``source``."""
    from attend.checkpoints.saved_run import load_run, restore

    datamodule, model = restore(load_run(checkpoint))
    batch = datamodule.batch_from_sources([source])
    result = model.decode(batch, model.test_search).result
    length, size = int(result.lengths[0]), int(result.source_lengths[0])
    heads = None if result.head_weights is None else result.head_weights[0, :, :length, :size]
    return result.weights[0, :length, :size], heads


def check_task(browser: str, name: str, checkpoint: str, source: str, folder: Path, shots: Path | None) -> bool:
    page = predict_page(checkpoint, source, folder / name)
    steps = len(page_data(page)["modes"]["search"])
    first, seconds = open_step(browser, page, 0)
    toured = tour(browser, page, steps)
    weights, heads = predicted_weights(checkpoint, source)
    difference = 0.0
    for t, seen in enumerate(toured):
        difference = max(difference, max(abs(a - float(b)) for a, b in zip(seen["weights"], weights[t], strict=True)))
        if heads is not None:
            for h, head in enumerate(seen["heads"]):
                difference = max(difference, max(abs(a - float(b)) for a, b in zip(head, heads[h, t], strict=True)))
    stepped = [seen["step"] for seen in toured] == list(range(weights.size(0)))
    print(f"{name}: page opens in {seconds:.2f} s (chromium process, start to exit), first step drawn at "
          f"{first['rendered_ms']:.0f} ms; stepped through {len(toured)} of {weights.size(0)} output steps; "
          f"max |page - predict.py| weight difference {difference:.1e} ({page})")
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        screenshot(browser, page, shots / f"explorer_{name}.png", f"step={min(3, steps - 1)}")
        print(f"{name}: screenshot {shots / f'explorer_{name}.png'}")
    return seconds < LIMIT_SECONDS and difference <= TOLERANCE and stepped


def check_server(checkpoint: str, sentence: str, tries: int = 5) -> bool:
    """The local server's answer time for a typed sentence (after it has started and loaded the model)."""
    from attend.config.compose import compose_config
    from attend.explore.server import explorer_server

    server = explorer_server(compose_config([f"ckpt_path={checkpoint}", "port=0"], "explore"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/explore"
    times = []
    try:
        for _ in range(tries):
            body = urllib.parse.urlencode({"text": sentence}).encode()
            start = time.perf_counter()
            with urllib.request.urlopen(url, data=body, timeout=60) as answer:
                page = answer.read()
            times.append(time.perf_counter() - start)
    finally:
        server.shutdown()
        server.server_close()
    ok = max(times) < LIMIT_SECONDS and b'id="data"' in page
    print(f"server: answers {sentence!r} in {min(times):.3f}-{max(times):.3f} s over {tries} requests "
          f"({checkpoint}, {len(page)} bytes)")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", action="append", default=[], help="name=checkpoint=input (repeat)")
    parser.add_argument("--server", help="checkpoint=sentence: time the local server's answer")
    parser.add_argument("--screenshots", type=Path, help="write explorer_<name>.png of each task's page here")
    args = parser.parse_args()
    browser = find_browser() if args.task else ""
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        for task in args.task:
            name, checkpoint, source = task.split("=", 2)
            ok &= check_task(browser, name, checkpoint, source, Path(folder), args.screenshots)
    if args.server:
        checkpoint, sentence = args.server.split("=", 1)
        ok &= check_server(checkpoint, sentence)
    print("PASS" if ok else "FAIL")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
