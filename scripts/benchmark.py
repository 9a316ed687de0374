"""Training and decoding speed of Attend against a plain loop and a tutorial implementation, side by side.

    .venv/bin/python scripts/benchmark.py                       # the full run (13 minutes on 2 idle cores)
    .venv/bin/python scripts/benchmark.py --quick               # tiny model on the dates, for tests
    .venv/bin/python scripts/benchmark.py --device cuda         # bf16 autocast, CUDA events, MFU

The fixed MT model (conf overrides in benchmarks.setup.MODEL_OVERRIDES) trains on the Ding
German-English pairs with 10-50 tokens on both sides. Variants A (Lightning), B (plain loop), C (Bahdanau
flow), D (tutorial) and D on bucketed batches take their steps in rounds, one step each, so machine noise
hits all alike; ratios come from the same run. Then batched against per-sentence greedy and beam search,
and every attention type's forward + backward time and peak memory (each in a fresh process). Prints
Markdown tables with PASS/FAIL per target and writes every figure to --json. Extra arguments are Hydra
overrides, as for train.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import hydra
import lightning
import torch
from hydra.errors import HydraException
from hydra.utils import instantiate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks/

from attend.config.errors import ConfigError
from benchmarks.attention_types import compare_attention_types
from benchmarks.decoding import compare_decoding
from benchmarks.flops import peak_flops, sizes_from_config
from benchmarks.memory import in_subprocess
from benchmarks.report import check_targets, paired_ratio, step_figures, table
from benchmarks.setup import (
    ATTENTION_SIZES,
    MODEL_OVERRIDES,
    QUICK_ATTENTION_SIZES,
    QUICK_OVERRIDES,
    sorted_batches,
)
from benchmarks.training import interleaved_run
from benchmarks.variants import VARIANTS, Bench, quiet, variant_peak


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides on top of the benchmark model")
    parser.add_argument("--steps", type=int, default=100, help="timed training steps of each variant")
    parser.add_argument("--warmup", type=int, default=20, help="untimed training steps first")
    parser.add_argument("--quick", action="store_true", help="tiny model, dates data, few steps (tests)")
    parser.add_argument("--json", type=Path, default=Path("outputs/benchmark.json"), help="where to write figures")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--peak-flops", type=float, default=None, help="device peak FLOP/s for MFU")
    parser.add_argument("--min-len", type=int, default=10, help="shortest source and target (tokens)")
    parser.add_argument("--max-len", type=int, default=50, help="longest source and target (tokens)")
    parser.add_argument("--decode-sentences", type=int, default=200, help="validation sentences decoded")
    parser.add_argument("--decode-batch", type=int, default=64, help="sentences a batched search call")
    parser.add_argument("--memory-steps", type=int, default=3, help="steps on the largest batches for peaks")
    parser.add_argument("--attention-repeats", type=int, default=2, help="timed forward+backward per type")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.warmup = min(args.steps, 4), min(args.warmup, 2)
        args.decode_sentences, args.decode_batch = min(args.decode_sentences, 12), min(args.decode_batch, 6)
        args.memory_steps, args.attention_repeats = 1, 1
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be positive and --warmup not negative")
    return args


def environment(device: str, peak_override: float | None) -> dict:
    """Hardware and versions the figures belong to."""
    name = torch.cuda.get_device_name() if device == "cuda" else cpu_model()
    return {
        "hardware": {
            "device": device,
            "device_name": name,
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(),
            "peak_flops": peak_flops(name, peak_override) if device == "cuda" else peak_override,
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "lightning": lightning.__version__,
            "hydra": hydra.__version__,
            "cuda": torch.version.cuda,
        },
    }


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


def main() -> None:
    args = parse_args()
    quiet()
    started = time.perf_counter()
    overrides = [*(QUICK_OVERRIDES if args.quick else MODEL_OVERRIDES), *args.overrides]
    env = environment(args.device, args.peak_flops)
    count = args.warmup + args.steps
    try:
        bench = Bench.prepare(overrides, args.min_len, args.max_len, count, args.device)
    except (HydraException, ConfigError) as error:
        sys.exit(f"benchmark.py: {error}")
    tokenizers = bench.data.datamodule.tokenizers()
    vocab = (tokenizers["source"].vocab_size, tokenizers["target"].vocab_size)
    sizes = {"A": sizes_from_config(bench.cfg, *vocab), "C": sizes_from_config(bench.cfg_bahdanau, *vocab)}
    print(f"{len(bench.data.train)} training pairs with {args.min_len}-{args.max_len} tokens; vocab {vocab}; "
          f"{args.warmup} + {args.steps} steps of each variant in rounds", flush=True)

    module = bench.attend_module()
    others = bench.steppers(module, [name for name in VARIANTS if name != "A"], count)
    times, losses = interleaved_run(module, others, bench.batches, bench.cfg, bench.device)
    peak = env["hardware"]["peak_flops"]
    training = {}
    for name, description in VARIANTS.items():
        flow_sizes = sizes["A"] if name in ("A", "B") else sizes["C"]
        training[name] = {"description": description,
                          **step_figures(times[name], bench.batches[name], args.warmup, flow_sizes, peak),
                          "losses": losses[name]}
    print("training steps done; peak memory of each variant in its own process", flush=True)
    for name in VARIANTS:
        result = in_subprocess(variant_peak, name, overrides, args.min_len, args.max_len, count,
                               args.memory_steps, args.device)
        training[name]["peak_memory_mb"] = result["peak_mb"]

    print("decoding", flush=True)
    searches = {"greedy": instantiate(bench.cfg.model.val_search), "beam": instantiate(bench.cfg.model.test_search)}
    decode_batches = sorted_batches(bench.data.val, bench.data.collate, args.decode_batch, args.decode_sentences)
    decoding = compare_decoding(module.to(bench.device), decode_batches, bench.data.collate, searches, bench.device)
    decoding["beam"]["beam_size"] = searches["beam"].beam_size

    print("attention types", flush=True)
    attention = compare_attention_types(QUICK_ATTENTION_SIZES if args.quick else ATTENTION_SIZES,
                                        args.attention_repeats, args.device)

    loss_difference = max(abs(a - b) for a, b in zip(losses["A"], losses["B"], strict=True))
    ratios = {
        "A/B step time": paired_ratio(times["A"], times["B"], args.warmup),
        "A/B loss max abs difference": loss_difference,
        "A/D target tokens per s": training["A"]["target_tokens_per_s"] / training["D"]["target_tokens_per_s"],
        "A/C target tokens per s": training["A"]["target_tokens_per_s"] / training["C"]["target_tokens_per_s"],
        "C/D target tokens per s": training["C"]["target_tokens_per_s"] / training["D"]["target_tokens_per_s"],
        "D_bucketed/D target tokens per s":
            training["D_bucketed"]["target_tokens_per_s"] / training["D"]["target_tokens_per_s"],
        "beam batched/single sentences per s": decoding["beam"]["speedup"],
        "beam same best hypothesis": decoding["beam"]["same_best_fraction"],
        "greedy batched/single sentences per s": decoding["greedy"]["speedup"],
        "max attention peak at speech sizes (MB)": max(row["peak_mb"] for row in attention["speech"].values()),
    }
    figures = {
        "command": " ".join(sys.argv),
        **env,
        "config": {"overrides": overrides, "warmup": args.warmup, "steps": args.steps, "min_len": args.min_len,
                   "max_len": args.max_len, "batch_size": bench.cfg.data.loader.batch_size,
                   "train_pairs": len(bench.data.train), "sizes": {k: vars(v) for k, v in sizes.items()},
                   "attention_sizes": QUICK_ATTENTION_SIZES if args.quick else ATTENTION_SIZES},
        "training": training,
        "decoding": decoding,
        "attention": attention,
        "ratios": ratios,
        "targets": check_targets(ratios),
    }
    figures["wall_s"] = time.perf_counter() - started
    print(table(figures))
    print("ratios: " + ", ".join(f"{k} {v:.4g}" for k, v in ratios.items()))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1))
    print(f"wrote {args.json} ({figures['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
