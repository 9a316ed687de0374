"""scripts/benchmark.py end to end on a tiny model, and the FLOPs formula against torch's counter."""

from __future__ import annotations

import ast
import json
import operator
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from torch.utils.flop_counter import FlopCounterMode

from attend.config.compose import compose_config
from benchmarks.flops import (
    ModelSizes,
    forward_flops,
    peak_flops,
    rnn_flops,
    sizes_from_config,
    training_flops,
)
from benchmarks.report import TARGETS
from benchmarks.variants import VARIANTS, Bench
from tests.helpers.paths import ROOT

TRAINING_FIGURES = {"median_step_ms", "target_tokens_per_s", "target_padding_fraction", "model_tflops_per_s",
                    "mfu", "peak_memory_mb", "losses"}

pytestmark = pytest.mark.slow  # the benchmark script end to end: make test-slow (CI runs both tiers)


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[str, dict]:
    """One ``--quick`` run (about a minute on 2 cores) shared by the tests of its figures: (stdout, the JSON)."""
    out = tmp_path_factory.mktemp("benchmark") / "bench.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout, json.loads(out.read_text())


def test_quick_benchmark_writes_every_figure(quick) -> None:
    stdout, figures = quick
    assert {"hardware", "versions", "config", "training", "decoding", "attention", "ratios", "targets"} <= set(figures)
    assert set(figures["training"]) == set(VARIANTS)
    for row in figures["training"].values():
        assert TRAINING_FIGURES <= set(row)
        assert row["peak_memory_mb"] is not None and row["peak_memory_mb"] >= 0
    types = sorted(p.stem for p in (ROOT / "conf" / "attention").glob("*.yaml"))
    for size in ("mt", "speech"):
        assert sorted(figures["attention"][size]) == types
    # the same module, init, batches and dropout masks: Lightning and the plain loop agree step by step
    a, b = figures["training"]["A"]["losses"], figures["training"]["B"]["losses"]
    assert len(a) == len(b) > 0
    assert a == pytest.approx(b, abs=1e-5)


def test_quick_training_figures_follow_from_the_step_times_and_batches(quick) -> None:
    """Tokens/s, padding and TFLOP/s of each variant are its timed steps' tokens and FLOPs over their seconds,
    recounted here from the batches the benchmark's config and seed give; the printed table shows them."""
    stdout, figures = quick
    config = figures["config"]
    warmup, steps = config["warmup"], config["steps"]
    assert (warmup, steps) == (2, 4)  # --quick
    bench = Bench.prepare(config["overrides"], config["min_len"], config["max_len"], warmup + steps, "cpu")
    sizes = {name: ModelSizes(**values) for name, values in config["sizes"].items()}
    seconds_in_steps = 0.0
    for name, row in figures["training"].items():
        assert len(row["step_ms"]) == warmup + steps and len(row["losses"]) == warmup + steps
        timed = [ms / 1000 for ms in row["step_ms"][warmup:]]
        assert row["timed_steps"] == steps and all(t > 0 for t in timed)
        seconds = sum(timed)
        seconds_in_steps += sum(row["step_ms"]) / 1000
        assert row["median_step_ms"] == pytest.approx(1000 * statistics.median(timed), rel=1e-9)
        assert row["mean_step_ms"] == pytest.approx(1000 * seconds / steps, rel=1e-9)
        used = bench.batches[name][warmup:]
        tokens = sum(int(batch["num_target_tokens"]) for batch in used)
        padded = sum(batch["tgt"][:, 1:].numel() for batch in used)
        assert config["min_len"] + 1 <= tokens / steps <= config["batch_size"] * (config["max_len"] + 1)
        assert row["target_tokens_per_s"] == pytest.approx(tokens / seconds, rel=1e-9), name
        assert row["target_padding_fraction"] == pytest.approx(1 - tokens / padded, abs=1e-12), name
        flops = sum(training_flops(sizes["A" if name in ("A", "B") else "C"], batch["src_lengths"],
                                   batch["tgt_lengths"] - 1) for batch in used)
        assert flops > 0 and row["model_tflops_per_s"] == pytest.approx(flops / seconds / 1e12, rel=1e-9), name
        assert row["mfu"] is None  # no peak FLOP/s of a CPU
        shown = f"| {name}: {row['description']} | {row['median_step_ms']:.1f} | {row['target_tokens_per_s']:,.0f} |"
        assert shown in stdout
    # every variant's steps ran one after the other inside the run
    assert seconds_in_steps < figures["wall_s"]
    assert f"({figures['wall_s']:.0f} s)" in stdout


def test_quick_decoding_and_attention_figures_are_consistent(quick) -> None:
    stdout, figures = quick
    for search in ("greedy", "beam"):
        row = figures["decoding"][search]
        assert row["sentences"] == 12  # --quick: the first 12 validation pairs
        assert row["batched_sentences_per_s"] > 0 and row["single_sentences_per_s"] > 0
        # speed-up: the single-sentence seconds over the batched ones, for the same sentences
        assert row["speedup"] == pytest.approx(row["batched_sentences_per_s"] / row["single_sentences_per_s"])
        assert row["same_best_fraction"] * row["sentences"] == pytest.approx(
            round(row["same_best_fraction"] * row["sentences"])
        )  # a count of sentences
        assert 0.0 <= row["same_best_fraction"] <= 1.0
        assert f"| {search} | {row['batched_sentences_per_s']:.1f} | {row['single_sentences_per_s']:.1f} |" in stdout
    assert figures["decoding"]["beam"]["beam_size"] == 5
    for size in figures["attention"].values():
        assert all(row["ms"] > 0 and row["peak_mb"] >= 0 for row in size.values())
        assert {name for name, row in size.items() if row["stepwise"]} == {"location"}  # state chains the steps


def test_quick_ratios_and_pass_or_fail_follow_from_the_figures(quick) -> None:
    """Each ratio is recomputed from the figures it names; each target's PASS/FAIL is its value against its
    goal, in the JSON and in the printed table."""
    stdout, figures = quick
    training, decoding, warmup = figures["training"], figures["decoding"], figures["config"]["warmup"]
    speech = figures["attention"]["speech"]
    tokens = {name: row["target_tokens_per_s"] for name, row in training.items()}
    a_steps, b_steps = training["A"]["step_ms"][warmup:], training["B"]["step_ms"][warmup:]
    expected = {
        "A/B step time": statistics.median(a / b for a, b in zip(a_steps, b_steps, strict=True)),
        "A/B loss max abs difference": max(
            abs(a - b) for a, b in zip(training["A"]["losses"], training["B"]["losses"], strict=True)
        ),
        "A/D target tokens per s": tokens["A"] / tokens["D"],
        "A/C target tokens per s": tokens["A"] / tokens["C"],
        "C/D target tokens per s": tokens["C"] / tokens["D"],
        "D_bucketed/D target tokens per s": tokens["D_bucketed"] / tokens["D"],
        "beam batched/single sentences per s": decoding["beam"]["speedup"],
        "beam same best hypothesis": decoding["beam"]["same_best_fraction"],
        "greedy batched/single sentences per s": decoding["greedy"]["speedup"],
        "max attention peak at speech sizes (MB)": max(row["peak_mb"] for row in speech.values()),
    }
    assert figures["ratios"] == pytest.approx(expected, rel=1e-9)
    compare = {"<=": operator.le, "<": operator.lt, ">=": operator.ge}
    assert [row["target"] for row in figures["targets"]] == list(TARGETS)
    for row in figures["targets"]:
        op, threshold = TARGETS[row["target"]]
        assert row["goal"] == f"{op} {threshold:g}" and row["value"] == figures["ratios"][row["target"]]
        assert row["pass"] == compare[op](row["value"], threshold), row
        verdict = "PASS" if row["pass"] else "FAIL"
        assert f"| {row['target']} | {row['value']:.4g} | {row['goal']} | {verdict} |" in stdout


SMALL = ["encoder.embedding_dim=8", "encoder.hidden_size=16", "encoder.num_layers=2", "decoder.embedding_dim=12",
         "decoder.hidden_size=32", "decoder.num_layers=2"]


@pytest.mark.parametrize("decoder", ["luong", "bahdanau"])
@pytest.mark.parametrize("attention", ["additive", "dot", "general", "cosine", "multihead", "location", "hard"])
def test_flops_formula_equals_torch_flop_counter(decoder: str, attention: str, tmp_path) -> None:
    """GRUs only: on the CPU torch runs LSTMs in a oneDNN kernel that the FLOP counter does not see."""
    cfg = compose_config([f"decoder={decoder}", f"attention={attention}", *SMALL], output_dir=tmp_path)
    vocab, batch, source, target = 50, 3, 7, 5
    torch.manual_seed(0)
    encoder = instantiate(cfg.encoder, vocab_size=vocab, pad_id=0)
    decoder_module = instantiate(
        cfg.decoder, vocab_size=vocab, pad_id=0, memory_dim=encoder.output_dim, attention=instantiate(cfg.attention)
    ).eval()
    src = torch.randint(1, vocab, (batch, source))
    tgt_in = torch.randint(1, vocab, (batch, target))
    src_lengths = torch.full((batch,), source)
    with FlopCounterMode(display=False) as counter:
        decoder_module(tgt_in, encoder(src, src_lengths))
    sizes = sizes_from_config(cfg, vocab, vocab)
    parts = forward_flops(sizes, src_lengths, torch.full((batch,), target))
    assert sum(parts.values()) == counter.get_total_flops()
    assert training_flops(sizes, src_lengths, torch.full((batch,), target)) == 3 * counter.get_total_flops()


def test_flops_by_hand(tmp_path) -> None:
    """The benchmark model's output layer and GRU gates, written out."""
    assert rnn_flops(tokens=10, input_size=256, hidden=512, layers=1, gates=3) == 10 * 2 * 3 * 512 * (256 + 512)
    model = ["decoder=luong", "attention=additive", "decoder.hidden_size=512", "encoder.hidden_size=256"]
    cfg = compose_config([*model, "decoder.tie_embeddings=false"], output_dir=tmp_path)
    sizes = sizes_from_config(cfg, 8000, 8000)
    parts = forward_flops(sizes, torch.tensor([20, 30]), torch.tensor([21, 11]))
    assert parts["output"] == 2 * 512 * 8000 * 32
    tied = sizes_from_config(compose_config([*model, "decoder.tie_embeddings=true"], output_dir=tmp_path), 8000, 8000)
    assert forward_flops(tied, torch.tensor([20, 30]), torch.tensor([21, 11]))["output"] == 2 * 256 * 8000 * 32
    assert parts["embedding"] == 0
    assert parts["attention"] == 2 * 512 * 128 * 50 + 2 * 512 * 128 * 32 + (2 * 128 + 2 * 512) * (20 * 21 + 30 * 11)


def test_peak_flops_table() -> None:
    assert peak_flops("NVIDIA H200") == 989e12
    assert peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert peak_flops("NVIDIA L40S") == 362e12
    assert peak_flops("Unknown GPU") is None
    assert peak_flops("Unknown GPU", override=1e14) == 1e14


def test_the_benchmark_lives_outside_the_installed_package() -> None:
    """benchmarks/ sits at the repository root; nothing in src/attend imports it (the package runs without it)."""
    assert not (ROOT / "src" / "attend" / "benchmark").exists()
    for path in sorted((ROOT / "src" / "attend").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            assert not any(m == "benchmarks" or m.startswith("benchmarks.") for m in modules), path


def test_the_script_finds_the_benchmark_from_any_directory(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
