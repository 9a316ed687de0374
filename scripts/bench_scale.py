"""How Attend's data layer scales with corpus size, per modality, on synthetic corpora in the real formats.

    make bench-scale                                             # text 10k/100k/1M, images 1k/10k/50k, audio 1k/5k/20k
    .venv/bin/python scripts/bench_scale.py --quick              # tiny sizes (tests)
    .venv/bin/python scripts/bench_scale.py --modalities text --text-sizes 200,400

For each modality (text: data=parallel_text, task=mt; images: data=karpathy, task=caption, encoder=cnn;
audio: data=librispeech, task=asr) and each size, plus an "empty-corpus" baseline, in fresh processes:

  1. first start, empty cache folder: compose the training config (Hydra compose API), prepare_data(),
     setup("fit"), build the model, take the first training batch and run one training step (forward,
     loss, backward, optimizer step). Preparation seconds, seconds from process start to the first step
     done, and peak RSS (ru_maxrss of the process plus that of its children, at the end).
  2. second start from the same cache folder (a new process): seconds to the first step and peak RSS.
     The same process then measures
  3. loader throughput: examples/s of train_dataloader() at data.loader.num_workers 0, 1, 2 (and the configured
     count), timed after each loader's first batch, against the model's demand: examples/s the model takes
     in training steps on this machine (--steps timed steps after one warm-up step).

Prints one table per modality, the log-log slope of each figure between the smallest and largest size
(~1: linear, ~0: flat) and PASS/FAIL per goal; writes every figure to --out (JSON). Generated corpora are
cached under --root and reused. Extra positional arguments are Hydra overrides for every run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale_corpora as corpora  # noqa: E402

MODALITIES = ("text", "images", "audio")
SIZES = {"text": [10_000, 100_000, 1_000_000], "images": [1_000, 10_000, 50_000], "audio": [1_000, 5_000, 20_000]}
QUICK_SIZES = {"text": [60, 120], "images": [12, 24], "audio": [8, 16]}
BASELINE = {"text": 50, "images": 50, "audio": 50}
QUICK_BASELINE = {"text": 30, "images": 6, "audio": 4}
EVAL_SIZES = {"text": (500, 500), "images": (100, 100), "audio": (50, 50)}  # (val, test), fixed
QUICK_EVAL_SIZES = {"text": (20, 20), "images": (6, 6), "audio": (4, 4)}
WORKERS = (0, 1, 2)
LIMITS = {"prep_slope": 1.2, "second_start_s": 10.0, "delta_rss_mb": 1536.0}
RESULT_TAG = "BENCH_SCALE_RESULT "


def overrides_for(modality: str, paths: dict[str, str], cache_dir: Path, args: argparse.Namespace) -> list[str]:
    """The training config of one run: the modality's task and data set, its corpus and a cache folder."""
    common = [f"paths.cache_dir={cache_dir}"]
    if args.prepare_workers is not None:
        common.append(f"data.prepare_workers={args.prepare_workers}")
    if modality == "text":
        # tiny corpora have fewer SentencePiece pieces than the configured 8000: take what there is
        task = ["task=mt", "data=parallel_text", f"data.source.root={paths['root']}",
                "++data.modality.tokenizer.hard_vocab_limit=false", "++data.tokenizer.hard_vocab_limit=false"]
    elif modality == "images":
        task = ["task=caption", "data=karpathy", f"data.source.path={paths['path']}",
                f"data.source.image_root={paths['image_root']}", "encoder=cnn"]
        if args.image_size is not None:
            common.append(f"data.modality.image_size={args.image_size}")
    else:
        task = ["task=asr", "data=librispeech", f"data.source.root={paths['root']}"]
    return [*task, *common, *args.overrides]


# the child: one fresh process, one start -------------------------------------------------------------
def child(spec: dict) -> dict:
    """One start of the training setup in this process; see the module docstring."""
    import resource

    started = spec["spawned"]  # the parent's clock just before it started this process
    result: dict = {"notes": []}
    import_start = time.time()
    import lightning as L
    import torch
    from hydra.utils import instantiate

    from attend.builder import build_datamodule, build_model
    from attend.config.checks import check_config
    from attend.config.compose import compose_config

    result["import_s"] = time.time() - import_start
    out = spec.get("output_dir") or tempfile.mkdtemp(prefix="attend-bench-scale-")
    cfg = compose_config(spec["overrides"], output_dir=out)
    check_config(cfg)
    L.seed_everything(cfg.seed, verbose=False)
    datamodule = build_datamodule(cfg)
    configured_workers = int(cfg.data.loader.num_workers or 0)
    result["configured_workers"] = configured_workers

    prep_start = time.time()
    datamodule.prepare_data()
    result["prepare_data_s"] = time.time() - prep_start
    datamodule.setup("fit")
    result["prep_s"] = time.time() - prep_start
    result["train_examples"] = train_examples(datamodule)

    model = build_model(cfg, datamodule).train()
    optimizer = instantiate(cfg.optim.optimizer)(model.parameters())

    def step(batch: dict) -> None:
        loss = model.teacher_forced_loss(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    loader = datamodule.train_dataloader()
    iterator = iter(loader)
    batch = next(iterator)
    step(batch)
    result["first_step_s"] = time.time() - started
    shut_down(iterator)
    del iterator, loader
    result["peak_rss_mb"] = peak_rss_mb(resource)
    result["self_rss_mb"], result["children_rss_mb"] = rss_parts_mb(resource)

    if spec.get("throughput"):
        batches = spec["loader_batches"]
        result["loader_examples_per_s"] = {}
        for workers in sorted({*WORKERS, configured_workers}):
            datamodule.loader.num_workers = workers
            result["loader_examples_per_s"][str(workers)] = loader_rate(datamodule.train_dataloader(), batches)
        datamodule.loader.num_workers = 0
        result.update(model_demand(datamodule, step, spec["steps"]))
        result["threads"] = torch.get_num_threads()
        result["peak_rss_after_throughput_mb"] = peak_rss_mb(resource)
    return result


def train_examples(datamodule) -> int:
    return len(datamodule.datasets["train"])


def examples_in(batch: dict) -> int:
    """Examples in a batch: the first dimension of its first tensor (or the length of its first list)."""
    import torch

    for value in batch.values():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    for value in batch.values():
        if isinstance(value, list | tuple):
            return len(value)
    raise ValueError(f"cannot count the examples of a batch with keys {sorted(batch)}")


def shut_down(iterator) -> None:
    """Stop a loader's worker processes now, so that they are reaped and count in RUSAGE_CHILDREN."""
    stop = getattr(iterator, "_shutdown_workers", None)
    if stop is not None:
        stop()


def peak_rss_mb(resource) -> float:
    """Peak resident memory of this process plus the largest of its reaped children's, in MB (Linux: KiB)."""
    return sum(rss_parts_mb(resource))


def rss_parts_mb(resource) -> tuple[float, float]:
    """(this process's peak RSS, the largest reaped child's peak RSS) in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return own / 1024, children / 1024


def loader_rate(loader, batches: int) -> float:
    """Examples/s of ``batches`` batches after the loader's first ones (epochs cycled when it has fewer)."""
    iterator = iter(loader)
    # not timed: the workers' start-up and the batches they prefetched meanwhile (which would come at once)
    for _ in range(1 + (loader.prefetch_factor or 0) * loader.num_workers):
        try:
            next(iterator)
        except StopIteration:
            iterator = iter(loader)
    examples, done, start = 0, 0, time.perf_counter()
    while done < batches:
        try:
            batch = next(iterator)
        except StopIteration:
            iterator = iter(loader)
            continue
        examples += examples_in(batch)
        done += 1
    elapsed = time.perf_counter() - start
    shut_down(iterator)
    return examples / elapsed


def model_demand(datamodule, step, steps: int) -> dict:
    """Examples/s the model takes in training steps: ``steps`` timed steps after one warm-up step."""
    batches = []
    while len(batches) < steps + 1:
        for batch in datamodule.train_dataloader():
            batches.append(batch)
            if len(batches) == steps + 1:
                break
    step(batches[0])
    examples, start = 0, time.perf_counter()
    for batch in batches[1:]:
        step(batch)
        examples += examples_in(batch)
    elapsed = time.perf_counter() - start
    return {"model_examples_per_s": examples / elapsed, "step_s": elapsed / steps,
            "examples_per_step": examples / steps}


# the parent ------------------------------------------------------------------------------------------
def run_child(spec: dict, log_path: Path, timeout: float) -> dict:
    """One start in a fresh process; its result, or {"error": ...} with the end of its log."""
    spec = {**spec, "spawned": time.time()}
    with open(log_path, "w") as log:
        try:
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s (log: {log_path})"}
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = log_path.read_text(errors="replace").strip().splitlines()[-8:]
    return {"error": f"exit {done.returncode}: " + " | ".join(tail)[-1500:], "log": str(log_path)}


def measure(modality: str, size: int, eval_sizes: tuple[int, int], args: argparse.Namespace, work: Path) -> dict:
    """Both starts of one (modality, size): corpus, first start, second start and throughput."""
    folder, generated = corpora.ensure(args.root, modality, size, *eval_sizes, workers=args.gen_workers)
    cache_dir = work / f"{modality}-{size}-cache"
    if cache_dir.exists():
        shutil.rmtree(cache_dir)  # the first start must find it empty
    cache_dir.mkdir(parents=True)
    spec = {"overrides": overrides_for(modality, corpora.paths_for(modality, folder), cache_dir, args),
            "steps": args.steps, "loader_batches": args.loader_batches,
            "output_dir": str(work / f"{modality}-{size}-output")}
    row: dict = {"size": size, "corpus": str(folder), "generate_s": generated, "overrides": spec["overrides"]}
    first = run_child({**spec, "throughput": False}, work / f"{modality}-{size}-first.log", args.timeout)
    row["first"] = first
    if "error" in first:
        return row
    row["second"] = run_child({**spec, "throughput": True}, work / f"{modality}-{size}-second.log", args.timeout)
    return row


def slope(rows: list[dict], figure) -> float | None:
    """The log-log slope of a figure between the smallest and largest size (None when not positive)."""
    points = [(row["size"], figure(row)) for row in rows]
    points = [(x, y) for x, y in points if y is not None]
    if len(points) < 2:
        return None
    (x0, y0), (x1, y1) = points[0], points[-1]
    if x0 == x1 or y0 <= 0 or y1 <= 0:
        return None
    return math.log(y1 / y0) / math.log(x1 / x0)


def growth(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value > 1.2:
        return "superlinear"
    if value >= 0.8:
        return "~linear"
    if value >= 0.2:
        return "sublinear"
    if value > -0.2:
        return "~flat"
    return "falling"


def get(row: dict, phase: str, key: str, workers: str | None = None):
    result = row.get(phase) or {}
    if "error" in result:
        return None
    value = result.get(key)
    if workers is not None:
        value = (value or {}).get(workers)
    return value


FIGURES = {  # name -> how to read it from a row
    "prep_s": lambda r: get(r, "first", "prep_s"),
    "first_start_s": lambda r: get(r, "first", "first_step_s"),
    "first_rss_mb": lambda r: get(r, "first", "peak_rss_mb"),
    "delta_rss_mb": lambda r: r.get("delta_rss_mb"),
    "second_start_s": lambda r: get(r, "second", "first_step_s"),
    "second_rss_mb": lambda r: get(r, "second", "peak_rss_mb"),
    **{f"loader_w{w}_ex_s": (lambda r, w=w: get(r, "second", "loader_examples_per_s", str(w))) for w in WORKERS},
    "model_ex_s": lambda r: get(r, "second", "model_examples_per_s"),
}


def summarize(modality: str, baseline: dict, rows: list[dict]) -> dict:
    """Figures, ΔRSS over the baseline, slopes and goals of one modality."""
    base_rss = FIGURES["first_rss_mb"](baseline)
    for row in [baseline, *rows]:
        rss = FIGURES["first_rss_mb"](row)
        row["delta_rss_mb"] = None if rss is None or base_rss is None else rss - base_rss
    # between the smallest and largest size; with one size, between the baseline and it
    points = rows if len(rows) >= 2 else [baseline, *rows]
    slopes = {name: slope(points, figure) for name, figure in FIGURES.items()}
    goals = []
    largest = rows[-1] if rows else {}
    prep_slope = slopes["prep_s"]
    goals.append({"goal": f"prep roughly linear (log-log slope <= {LIMITS['prep_slope']})",
                  "value": prep_slope, "pass": prep_slope is not None and prep_slope <= LIMITS["prep_slope"]})
    seconds = [FIGURES["second_start_s"](row) for row in rows]
    worst = None if not seconds or None in seconds else max(seconds)
    goals.append({"goal": f"second start < {LIMITS['second_start_s']:.0f} s at every size", "value": worst,
                  "pass": worst is not None and worst < LIMITS["second_start_s"]})
    if modality in ("text", "images"):
        delta = largest.get("delta_rss_mb")
        limit_gb = LIMITS["delta_rss_mb"] / 1024
        goals.append({"goal": f"ΔRSS < {limit_gb:.1f} GB at the largest size ({largest.get('size')})",
                      "value": delta, "pass": delta is not None and delta < LIMITS["delta_rss_mb"]})
    configured = get(largest, "second", "configured_workers")
    rate = get(largest, "second", "loader_examples_per_s", str(configured)) if configured is not None else None
    demand = FIGURES["model_ex_s"](largest) if largest else None
    goals.append({"goal": f"loader at the configured {configured} workers >= model demand (largest size)",
                  "value": None if rate is None or demand is None else rate / demand,
                  "pass": rate is not None and demand is not None and rate >= demand})
    return {"baseline": baseline, "rows": rows, "slopes": slopes, "goals": goals}


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def print_modality(modality: str, summary: dict) -> None:
    header = ["size", "prep s", "1st start s", "1st RSS MB", "ΔRSS MB", "2nd start s", "2nd RSS MB",
              *[f"loader ex/s w={w}" for w in WORKERS], "cfg w", "model ex/s"]
    print(f"\n## {modality}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" for _ in header) + "|")
    for row in [summary["baseline"], *summary["rows"]]:
        label = f"{row['size']:,}" + (" (baseline)" if row is summary["baseline"] else "")
        error = (row.get("first") or {}).get("error") or (row.get("second") or {}).get("error")
        cells = [label] + [fmt(FIGURES[name](row), 2 if name.endswith("start_s") or name == "prep_s" else 1) for name in
                           ("prep_s", "first_start_s", "first_rss_mb", "delta_rss_mb", "second_start_s",
                            "second_rss_mb", *[f"loader_w{w}_ex_s" for w in WORKERS])]
        cells += [fmt(get(row, "second", "configured_workers")), fmt(FIGURES["model_ex_s"](row))]
        print("| " + " | ".join(cells) + " |")
        if error:
            print(f"|   FAILED: {error[:400]} |")
        for note in sorted({n for phase in ("first", "second") for n in (row.get(phase) or {}).get("notes", [])}):
            print(f"|   note: {note} |")
    print()
    for name, value in summary["slopes"].items():
        print(f"growth {modality} {name}: log-log slope {fmt(value, 2)} ({growth(value)})")
    for goal in summary["goals"]:
        value = goal["value"]
        shown = fmt(value, 2) if isinstance(value, float) else fmt(value)
        print(f"{'PASS' if goal['pass'] else 'FAIL'} {modality}: {goal['goal']}: {shown}")


def parse_sizes(text: str | None) -> list[int] | None:
    """Comma-separated positive sizes ("10000,100000"), sorted; argparse turns a bad one into a usage error."""
    if text is None:
        return None
    try:
        sizes = sorted(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more sizes of at least 1")
    return sizes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run, as for train.py")
    parser.add_argument("--modalities", default="text,images,audio", help="comma-separated: text,images,audio")
    for modality in MODALITIES:
        parser.add_argument(f"--{modality}-sizes", default=None, type=parse_sizes,
                            help=f"comma-separated training sizes (default {','.join(map(str, SIZES[modality]))})")
    parser.add_argument("--baseline-size", type=int, default=None,
                        help="examples of the 'empty-corpus' baseline (default 50; --quick: smaller)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few steps, for tests")
    parser.add_argument("--root", type=Path, default=ROOT / "outputs/bench_scale/corpora", help="generated corpora")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs/bench_scale/results.json", help="JSON results")
    parser.add_argument("--work", type=Path, default=None,
                        help="cache folders and logs of the runs (default: a fresh folder next to --out)")
    parser.add_argument("--prepare-workers", type=int, default=None, help="data.prepare_workers (default: config's)")
    parser.add_argument("--gen-workers", type=int, default=1, help="processes that generate the corpora")
    parser.add_argument("--steps", type=int, default=None, help="timed training steps of the model demand (default 5)")
    parser.add_argument("--loader-batches", type=int, default=None, help="timed batches per loader (default 30)")
    parser.add_argument("--image-size", type=int, default=None,
                        help="data.modality.image_size (default: data=karpathy's 224, as COCO; --quick 32)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one start may take")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return args
    args.modalities = [m.strip() for m in args.modalities.split(",") if m.strip()]
    unknown = sorted(set(args.modalities) - set(MODALITIES))
    if unknown:
        parser.error(f"unknown modality {', '.join(unknown)}; choose from {', '.join(MODALITIES)}")
    args.sizes = {m: getattr(args, f"{m}_sizes") or (QUICK_SIZES if args.quick else SIZES)[m]
                  for m in MODALITIES}
    args.steps = args.steps or (2 if args.quick else 5)
    args.loader_batches = args.loader_batches or (3 if args.quick else 30)
    args.image_size = args.image_size or (32 if args.quick else None)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child is not None:
        result = child(json.loads(args.child))
        print(RESULT_TAG + json.dumps(result), flush=True)
        return
    args.root = args.root.resolve()
    work = args.work or args.out.parent / time.strftime("runs/%Y%m%d-%H%M%S")
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    import platform

    results = {"command": sys.argv, "quick": args.quick, "machine": {"cpus": os.cpu_count(),
               "python": platform.python_version(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS")},
               "limits": LIMITS, "work": str(work), "modalities": {}}
    for modality in args.modalities:
        base_size = args.baseline_size or (QUICK_BASELINE if args.quick else BASELINE)[modality]
        eval_sizes = (QUICK_EVAL_SIZES if args.quick else EVAL_SIZES)[modality]
        print(f"{modality}: baseline {base_size}, sizes {', '.join(map(str, args.sizes[modality]))}", flush=True)
        baseline = measure(modality, base_size, eval_sizes, args, work / "baseline")
        rows = []
        for size in args.sizes[modality]:
            if "error" in baseline["first"]:
                rows.append({"size": size, "first": {"error": "skipped: the baseline failed"}})
                continue
            rows.append(measure(modality, size, eval_sizes, args, work))
            print(f"  {modality} {size}: done", flush=True)
        summary = summarize(modality, baseline, rows)
        results["modalities"][modality] = summary
        print_modality(modality, summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nresults: {args.out}")


if __name__ == "__main__":
    main()
