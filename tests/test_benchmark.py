"""scripts/benchmark.py end to end on a tiny model, and the FLOPs formula against torch's counter."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.flops import forward_flops, peak_flops, rnn_flops, sizes_from_config, training_flops
from benchmarks.variants import VARIANTS

ROOT = Path(__file__).resolve().parents[1]
TRAINING_FIGURES = {"median_step_ms", "target_tokens_per_s", "target_padding_fraction", "model_tflops_per_s",
                    "mfu", "peak_memory_mb", "losses"}


def test_quick_benchmark_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert {"hardware", "versions", "config", "training", "decoding", "attention", "ratios", "targets"} <= set(figures)
    assert set(figures["training"]) == set(VARIANTS)
    for row in figures["training"].values():
        assert TRAINING_FIGURES <= set(row)
        assert row["target_tokens_per_s"] > 0 and row["peak_memory_mb"] is not None
    for search in ("greedy", "beam"):
        row = figures["decoding"][search]
        assert row["batched_sentences_per_s"] > 0 and row["single_sentences_per_s"] > 0
        assert 0.0 <= row["same_best_fraction"] <= 1.0
    types = sorted(p.stem for p in (ROOT / "conf" / "attention").glob("*.yaml"))
    for size in ("mt", "speech"):
        assert sorted(figures["attention"][size]) == types
    # the same module, init, batches and dropout masks: Lightning and the plain loop agree step by step
    a, b = figures["training"]["A"]["losses"], figures["training"]["B"]["losses"]
    assert len(a) == len(b) > 0
    assert a == pytest.approx(b, abs=1e-5)
    assert {row["target"] for row in figures["targets"]} <= set(figures["ratios"])
    assert "PASS" in run.stdout or "FAIL" in run.stdout


def compose_model(overrides: list[str]):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("train", overrides=[f"paths.root_dir={ROOT}", "paths.output_dir=/tmp/attend-test", *overrides])


SMALL = ["encoder.embedding_dim=8", "encoder.hidden_size=16", "encoder.num_layers=2", "decoder.embedding_dim=12",
         "decoder.hidden_size=32", "decoder.num_layers=2"]


@pytest.mark.parametrize("decoder", ["luong", "bahdanau"])
@pytest.mark.parametrize("attention", ["additive", "dot", "general", "cosine", "multihead", "location", "hard"])
def test_flops_formula_equals_torch_flop_counter(decoder: str, attention: str) -> None:
    """GRUs only: on the CPU torch runs LSTMs in a oneDNN kernel that the FLOP counter does not see."""
    cfg = compose_model([f"decoder={decoder}", f"attention={attention}", *SMALL])
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


def test_flops_by_hand() -> None:
    """The benchmark model's output layer and GRU gates, written out."""
    assert rnn_flops(tokens=10, input_size=256, hidden=512, layers=1, gates=3) == 10 * 2 * 3 * 512 * (256 + 512)
    cfg = compose_model(["decoder=luong", "attention=additive", "decoder.hidden_size=512", "encoder.hidden_size=256"])
    sizes = sizes_from_config(cfg, 8000, 8000)
    parts = forward_flops(sizes, torch.tensor([20, 30]), torch.tensor([21, 11]))
    assert parts["output"] == 2 * 512 * 8000 * 32
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
