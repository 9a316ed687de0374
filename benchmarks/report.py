"""Figures from the raw measurements, the targets of the issue, and the printed table."""

from __future__ import annotations

import statistics

from benchmarks.flops import ModelSizes, training_flops

# the speed goals on this project's CPU, checked on ratios measured side by side in one run
TARGETS = {
    "A/B step time": ("<=", 1.05),
    "A/B loss max abs difference": ("<", 1e-5),
    "A/D target tokens per s": (">=", 2.0),
    "beam batched/single sentences per s": (">=", 5.0),
    "beam same best hypothesis": (">=", 0.99),
    "max attention peak at speech sizes (MB)": ("<=", 4096.0),
}


def step_figures(
    times: list[float], batches: list[dict], warmup: int, sizes: ModelSizes, peak: float | None
) -> dict:
    """Median step time, target tokens per second, padding and model FLOPs of the timed steps."""
    timed, used = times[warmup:], batches[warmup : len(times)]
    tokens = sum(int(b["num_target_tokens"]) for b in used)
    padded = sum(b["tgt"][:, 1:].numel() for b in used)
    flops = sum(training_flops(sizes, b["src_lengths"], b["tgt_lengths"] - 1) for b in used)
    seconds = sum(timed)
    achieved = flops / seconds
    return {
        "timed_steps": len(timed),
        "median_step_ms": 1000 * statistics.median(timed),
        "mean_step_ms": 1000 * seconds / len(timed),
        "target_tokens_per_s": tokens / seconds,
        "target_padding_fraction": 1 - tokens / padded,
        "model_tflops_per_s": achieved / 1e12,
        "mfu": achieved / peak if peak else None,
        "step_ms": [1000 * t for t in times],  # every step, warm-up included, in order
    }


def paired_ratio(a: list[float], b: list[float], warmup: int) -> float:
    """Median over the timed steps of a_i / b_i: both ran step i on the same batch, one after the other."""
    return statistics.median(x / y for x, y in zip(a[warmup:], b[warmup:], strict=True))


def check_targets(values: dict[str, float]) -> list[dict]:
    """Each target with its measured value and PASS/FAIL."""
    rows = []
    for name, (op, threshold) in TARGETS.items():
        value = values.get(name)
        ok = value is not None and {"<=": value <= threshold, "<": value < threshold, ">=": value >= threshold}[op]
        rows.append({"target": name, "value": value, "goal": f"{op} {threshold:g}", "pass": bool(ok)})
    return rows


def table(figures: dict) -> str:
    """The measurements as Markdown tables."""
    lines = ["| variant | median step (ms) | target tokens/s | padding | peak memory (MB) | model TFLOP/s | MFU |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in figures["training"].items():
        mfu = "n/a" if row["mfu"] is None else f"{100 * row['mfu']:.1f} %"
        peak = row.get("peak_memory_mb")
        lines.append(
            f"| {name}: {row['description']} | {row['median_step_ms']:.1f} | {row['target_tokens_per_s']:,.0f} | "
            f"{100 * row['target_padding_fraction']:.0f} % | {'n/a' if peak is None else f'{peak:,.0f}'} | "
            f"{row['model_tflops_per_s']:.3f} | {mfu} |"
        )
    lines += ["", "| search | batched sentences/s | single sentences/s | speed-up | same best hypothesis |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for name, row in figures["decoding"].items():
        lines.append(
            f"| {name} | {row['batched_sentences_per_s']:.1f} | {row['single_sentences_per_s']:.1f} | "
            f"{row['speedup']:.1f}x | {100 * row['same_best_fraction']:.1f} % ({row['sentences']} sentences) |"
        )
    sizes = figures["attention"]
    lines += ["", "| attention | " + " | ".join(f"{s} fwd+bwd (ms) | {s} peak (MB)" for s in sizes) + " |",
              "| --- |" + " ---: | ---: |" * len(sizes)]
    for name in next(iter(sizes.values())):
        cells = []
        for size in sizes.values():
            row = size[name]
            cells += [f"{row['ms']:.1f}{' (steps)' if row['stepwise'] else ''}", f"{row['peak_mb']:,.0f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| target | measured | goal | result |", "| --- | ---: | --- | --- |"]
    for row in figures["targets"]:
        value = "n/a" if row["value"] is None else f"{row['value']:.4g}"
        lines.append(f"| {row['target']} | {value} | {row['goal']} | {'PASS' if row['pass'] else 'FAIL'} |")
    return "\n".join(lines)
