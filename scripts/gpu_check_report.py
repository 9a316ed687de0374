"""The table of a scripts/gpu_check.sh run: step time, tokens/s, peak memory, MFU, test metric, loss curves.

    .venv/bin/python scripts/gpu_check_report.py [OUT] [--warmup N] [--peak-flops F] [--json PATH]

OUT (default outputs/gpu_check) holds one folder per run, <task>-<variant>, as gpu_check.sh writes them:
csv/metrics.csv (the CSV logger), summary.json and config_resolved.yaml (train.py), gpu_check.json (the
script: steps, exit status, wall time) and, on a GPU, nvidia_smi.csv (memory used, sampled every 200 ms).

What each column measures:
  median step    median wall time of one training step after the warm-up steps, from Lightning's
                 ThroughputMonitor (train/time: seconds since the start of training at the end of each batch,
                 after torch.cuda.synchronize(); validation excluded); fetch, forward, backward, clipping and
                 optimizer step, with the callbacks' hooks
  target tok/s   predicted target tokens (eos, not bos, no padding; train/samples counts the batches'
                 num_target_tokens) over the time of the same steps; with DDP rank 0's count x devices
  peak alloc     torch.cuda.max_memory_allocated of rank 0 during training (Lightning's DeviceStatsMonitor logs
                 torch.cuda.memory_stats() every step: allocated_bytes.all.peak); n/a on the CPU
  smi peak       the largest memory.used nvidia-smi reported for any GPU while the run lasted (CUDA context
                 and the caching allocator's reserve included); n/a on the CPU
  TFLOP/s, MFU   model FLOPs per target token (benchmarks.flops, the benchmark's formula: matmuls over
                 the real positions, x3 for forward and backward) averaged over the run's training pairs, times
                 target tok/s; MFU divides by the device's dense bf16 peak (the same table, or --peak-flops)
                 times the devices, the fp32 runs included. The formula covers the text encoder with the RNN
                 decoders (task=mt): n/a for the image and audio encoders
  test           the task's headline test metric (BLEU, CIDEr-D, CER) on the first test batches, beam search
Losses: train/loss at five evenly spaced steps, and the relative difference of the bf16 loss from the fp32
loss at every step (the same seed: both runs see the same batches and dropout masks).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root: benchmarks.flops, from any working directory

TASKS = ["mt", "caption", "asr"]
VARIANTS = ["bf16", "fp32", "ddp"]
PEAK_COLUMN = "allocated_bytes.all.peak"  # of torch.cuda.memory_stats(), as DeviceStatsMonitor logs it
MIB = 2**20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default="outputs/gpu_check", help="the folder of the runs")
    parser.add_argument("--warmup", type=int, default=None,
                        help="steps left out of the timing (default: a tenth of the steps, 1 to 20)")
    parser.add_argument("--peak-flops", type=float, default=None, help="the device's peak FLOP/s for MFU")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    return parser.parse_args(argv)


def read_metrics(path: Path) -> list[dict[str, float]]:
    """The CSV logger's rows, each with its non-empty cells as floats."""
    if not path.is_file():
        return []
    with path.open(newline="") as file:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(file)]


def step_figures(rows: list[dict[str, float]], warmup: int | None) -> dict:
    """Median step time and target tokens per second of the steps after ``warmup``, from ThroughputMonitor's
    cumulative train/time and train/samples at the end of each batch (train/batches)."""
    points = {int(r["train/batches"]): (r["train/time"], r["train/samples"])
              for r in rows if {"train/batches", "train/time", "train/samples"} <= r.keys()}
    if not points:
        return {"steps_timed": 0, "warmup": 0, "median_step_ms": None, "tokens_per_s": None}
    batches = sorted(points)
    if warmup is None:
        warmup = min(20, max(1, len(batches) // 10))
    warmup = min(warmup, len(batches) - 1)
    seconds, tokens = [], []  # per logged step (a gap between logged steps counts as that many steps)
    previous, (t_prev, s_prev) = 0, (0.0, 0.0)
    for batch in batches:
        t, s = points[batch]
        count = batch - previous
        seconds += [(t - t_prev) / count] * count
        tokens += [(s - s_prev) / count] * count
        previous, t_prev, s_prev = batch, t, s
    timed_seconds, timed_tokens = seconds[warmup:], tokens[warmup:]
    total = sum(timed_seconds)
    return {
        "steps_timed": len(timed_seconds),
        "warmup": warmup,
        "median_step_ms": 1000 * statistics.median(timed_seconds),
        "tokens_per_s": sum(timed_tokens) / total if total > 0 else None,
    }


def peak_allocated_mib(rows: list[dict[str, float]]) -> float | None:
    values = [v for r in rows for k, v in r.items() if k.endswith(PEAK_COLUMN)]
    return max(values) / MIB if values else None


def nvidia_smi(path: Path) -> tuple[float | None, str | None]:
    """The largest memory.used (MiB) of any GPU in the samples, and the GPUs' name."""
    peak, name = None, None
    if path.is_file():
        for line in path.read_text().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                used = float(parts[2])
            except ValueError:
                continue
            name = name or parts[1]
            peak = used if peak is None else max(peak, used)
    return peak, name


def losses(rows: list[dict[str, float]]) -> dict[int, float]:
    """train/loss by global step."""
    return {int(r["step"]): r["train/loss"] for r in rows if "train/loss" in r and "step" in r}


def spaced(steps: list[int], count: int = 5) -> list[int]:
    """``count`` evenly spaced entries of ``steps`` (first and last included)."""
    if len(steps) <= count:
        return steps
    return sorted({steps[round(i * (len(steps) - 1) / (count - 1))] for i in range(count)})


_flops_cache: dict[str, tuple[float | None, str]] = {}


def flops_per_token(run: Path) -> tuple[float | None, str]:
    """Training FLOPs per predicted target token of the run's model, averaged over its training pairs, and
    why not where the formula does not cover the model."""
    config = run / "config_resolved.yaml"
    if not config.is_file():
        return None, "no config"
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(config)
    if cfg.encoder._target_.rsplit(".", 1)[-1] != "TextEncoder":
        return None, f"no formula for {cfg.encoder._target_.rsplit('.', 1)[-1]}"
    key = json.dumps(OmegaConf.to_container(OmegaConf.masked_copy(cfg, ["data", "encoder", "attention", "decoder"])),
                     sort_keys=True, default=str)
    if key not in _flops_cache:
        try:
            import torch

            from attend.builder import build_datamodule
            from benchmarks.flops import sizes_from_config, training_flops

            datamodule = build_datamodule(cfg)
            datamodule.prepare_data()
            datamodule.setup("fit")
            tokenizers = datamodule.tokenizers()
            sizes = sizes_from_config(cfg, tokenizers["source"].vocab_size, tokenizers["target"].vocab_size)
            data = datamodule.datasets["train"]
            src = torch.from_numpy(data.encoded.column("source_size")[data.examples[:, 0]].astype("int64"))
            steps = torch.from_numpy(data.target_sizes + 1)  # decoder steps: the target with eos
            flops = training_flops(sizes, src, steps) / int(torch.as_tensor(steps).sum())
            _flops_cache[key] = (flops, "")
        except Exception as error:  # a model the formula does not cover, data that is not there
            _flops_cache[key] = (None, f"{type(error).__name__}: {error}".splitlines()[0][:80])
    return _flops_cache[key]


def run_row(run: Path, warmup: int | None, peak_override: float | None) -> dict:
    """The figures of one run folder."""
    meta = json.loads((run / "gpu_check.json").read_text()) if (run / "gpu_check.json").is_file() else {}
    task, _, variant = run.name.partition("-")
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    rows = read_metrics(run / "csv" / "metrics.csv")
    smi_peak, gpu_name = nvidia_smi(run / "nvidia_smi.csv")
    devices = 1
    if (run / "config_resolved.yaml").is_file():
        from omegaconf import OmegaConf

        trainer = OmegaConf.load(run / "config_resolved.yaml").trainer
        devices = int(trainer.devices) * int(trainer.get("num_nodes") or 1) if str(trainer.devices).isdigit() else 1
    figures = step_figures(rows, warmup)
    tokens_per_s = None if figures["tokens_per_s"] is None else figures["tokens_per_s"] * devices
    per_token, why = flops_per_token(run)
    achieved = per_token * tokens_per_s if per_token is not None and tokens_per_s else None
    peak = None
    if peak_override or gpu_name:
        from benchmarks.flops import peak_flops

        peak = peak_flops(gpu_name or "", peak_override)
    metric = summary.get("monitor", {}).get("metric", "")
    headline = "test/" + metric.split("/", 1)[-1] if metric else None
    rc = meta.get("rc")
    statuses = {None: "no run", 0: "ok" if summary else "no summary", -1: "skipped", 124: "timeout"}
    status = statuses.get(rc, f"failed ({rc})")
    return {
        "task": task, "variant": variant, "status": status, "device": gpu_name or meta.get("accelerator", "?"),
        "devices": devices, "steps": summary.get("steps", meta.get("steps")), **figures,
        "tokens_per_s": tokens_per_s,
        "peak_allocated_mib": peak_allocated_mib(rows), "nvidia_smi_peak_mib": smi_peak,
        "flops_per_token": per_token, "flops_note": why,
        "model_tflops_per_s": None if achieved is None else achieved / 1e12,
        "peak_flops": peak, "mfu": achieved / (peak * devices) if achieved and peak else None,
        "test_metric": headline, "test_value": summary.get("test", {}).get(headline) if headline else None,
        "wall_seconds": meta.get("wall_seconds"), "fit_seconds": summary.get("fit_seconds"),
        "losses": losses(rows),
    }


def loss_rows(rows: list[dict]) -> list[dict]:
    """Each run's loss at five steps, and the bf16 runs' relative difference from fp32 at every step."""
    out = []
    for row in rows:
        curve = row["losses"]
        fp32 = next((r["losses"] for r in rows if r["task"] == row["task"] and r["variant"] == "fp32"), None)
        entry = {"task": row["task"], "variant": row["variant"], "points": {}, "max_rel_diff": None,
                 "mean_rel_diff": None, "compared_steps": 0}
        reference = fp32 if fp32 and row["variant"] == "bf16" else None
        steps = sorted(set(curve) & set(reference)) if reference else sorted(curve)
        entry["points"] = {s: curve[s] for s in spaced(steps)}
        if reference:
            diffs = [abs(curve[s] - reference[s]) / abs(reference[s]) for s in steps if reference[s]]
            if diffs:
                entry.update(max_rel_diff=max(diffs), mean_rel_diff=sum(diffs) / len(diffs),
                             compared_steps=len(diffs))
        out.append(entry)
    return out


def fmt(value, spec: str = ",.0f", missing: str = "n/a") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return format(value, spec)


COLUMNS = ["task", "variant", "status", "steps", "median step (ms)", "target tok/s", "peak alloc (MiB)",
           "smi peak (MiB)", "model TFLOP/s", "MFU", "test", "wall (s)"]


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "| --- | --- | --- |" + " ---: |" * (len(COLUMNS) - 3)]
    for r in rows:
        test = "n/a" if r["test_value"] is None else f"{r['test_metric'].split('/', 1)[1]} {r['test_value']:.4g}"
        tflops = fmt(r["model_tflops_per_s"], ".3g", "n/a" + (f" ({r['flops_note']})" if r["flops_note"] else ""))
        cells = [
            r["task"], r["variant"] + (f" x{r['devices']}" if r["devices"] > 1 else ""), r["status"],
            fmt(r["steps"], "d", "?"), fmt(r["median_step_ms"], ".1f"), fmt(r["tokens_per_s"]),
            fmt(r["peak_allocated_mib"]), fmt(r["nvidia_smi_peak_mib"]), tflops,
            fmt(None if r["mfu"] is None else 100 * r["mfu"], ".2f") + (" %" if r["mfu"] is not None else ""),
            test, fmt(r["wall_seconds"], ".1f"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def loss_table(entries: list[dict]) -> str:
    lines = ["| task | variant | train/loss at steps | max rel. diff to fp32 | mean rel. diff to fp32 |",
             "| --- | --- | --- | ---: | ---: |"]
    for e in entries:
        points = ", ".join(f"{s}: {v:.4f}" for s, v in e["points"].items()) or "n/a"
        compared = "" if e["max_rel_diff"] is None else f" ({e['compared_steps']} steps)"
        lines.append(f"| {e['task']} | {e['variant']} | {points} | "
                     f"{fmt(None if e['max_rel_diff'] is None else 100 * e['max_rel_diff'], '.2g', '-')}"
                     f"{' %' if e['max_rel_diff'] is not None else ''}{compared} | "
                     f"{fmt(None if e['mean_rel_diff'] is None else 100 * e['mean_rel_diff'], '.2g', '-')}"
                     f"{' %' if e['mean_rel_diff'] is not None else ''} |")
    return "\n".join(lines)


def order(run: Path) -> tuple:
    task, _, variant = run.name.partition("-")
    return (TASKS.index(task) if task in TASKS else len(TASKS), task,
            VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS), variant)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    runs = sorted((p for p in out.glob("*-*") if p.is_dir() and (p / "gpu_check.json").is_file()), key=order)
    if not runs:
        print(f"gpu_check_report.py: no runs of gpu_check.sh in {out}", file=sys.stderr)
        return 2
    rows = [run_row(run, args.warmup, args.peak_flops) for run in runs]
    device = next((r["device"] for r in rows if r["device"] not in ("gpu", "cpu", "?")), rows[0]["device"])
    peak = next((r["peak_flops"] for r in rows if r["peak_flops"]), None)
    warmups = sorted({r["warmup"] for r in rows})
    print(f"device: {device}; peak for MFU: {fmt(None if peak is None else peak / 1e12, ',.0f')} TFLOP/s (dense bf16); "
          f"step times leave out the first {'/'.join(map(str, warmups))} step(s) as warm-up\n")
    print(table(rows))
    entries = loss_rows(rows)
    print("\n" + loss_table(entries))
    if args.json:
        for row in rows:
            row["losses"] = {str(k): v for k, v in row["losses"].items()}
        for e in entries:
            e["points"] = {str(k): v for k, v in e["points"].items()}
        args.json.write_text(json.dumps({"runs": rows, "losses": entries}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
