"""scripts/gpu_check.sh and scripts/gpu_check_report.py: a CPU run of one tiny task, and the GPU-only figures
of the report (peak memory, nvidia-smi, MFU) on hand-made run folders."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT

# task=mt on generated dates with a tiny model: the script's plumbing, not the task's figures
TINY = (
    "data=dates data.source.n_train=300 data.source.n_val=16 data.source.n_test=16 data.loader.batch_size=16 "
    "data.loader.eval_batch_size=16 encoder.embedding_dim=8 encoder.hidden_size=16 decoder.embedding_dim=8 "
    "decoder.hidden_size=32"
)


def load_report():
    spec = importlib.util.spec_from_file_location("gpu_check_report", ROOT / "scripts" / "gpu_check_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_rows(text: str, header_start: str) -> tuple[list[str], list[list[str]]]:
    """The header and body cells of the Markdown table whose header starts with ``header_start``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        body.append([cell.strip() for cell in line.strip("|").split("|")])
    return [cell.strip() for cell in lines[start].strip("|").split("|")], body


@pytest.mark.slow
def test_gpu_check_runs_one_task_on_the_cpu_and_reports_it(tmp_path):
    out = tmp_path / "gpu_check"
    env = {**os.environ, "ACCELERATOR": "cpu", "STEPS": "3", "TASKS": "mt", "OUT": str(out), "EXTRA": TINY,
           "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "REPORT_ARGS": f"--json {tmp_path / 'report.json'}"}
    result = subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    header, rows = table_rows(result.stdout, "| task | variant | status")
    assert header == load_report().COLUMNS
    assert [row[:4] for row in rows] == [["mt", "bf16", "ok", "3"], ["mt", "fp32", "ok", "3"]]  # no DDP on the CPU
    cells = [dict(zip(header, row, strict=True)) for row in rows]
    for row in cells:
        assert float(row["median step (ms)"]) > 0 and float(row["target tok/s"].replace(",", "")) > 0
        assert float(row["model TFLOP/s"]) > 0  # the FLOPs formula covers the text encoder and Luong decoder
        assert row["MFU"] == row["peak alloc (MiB)"] == row["smi peak (MiB)"] == "n/a"  # no GPU peak, no GPU
        assert row["test"].startswith("bleu ")  # beam search decoded the test batches

    loss_header, loss_rows = table_rows(result.stdout, "| task | variant | train/loss")
    assert [row[:2] for row in loss_rows] == [["mt", "bf16"], ["mt", "fp32"]]
    assert loss_rows[0][3].endswith("% (3 steps)") and loss_rows[1][3] == "-"
    assert (out / "report.md").read_text() == result.stdout[result.stdout.index("device:"):]

    report = json.loads((tmp_path / "report.json").read_text())
    bf16, fp32 = report["runs"]
    assert bf16["steps"] == fp32["steps"] == 3 and bf16["steps_timed"] == 2  # one warm-up step left out
    assert bf16["flops_per_token"] == fp32["flops_per_token"] > 0
    assert set(bf16["losses"]) == set(fp32["losses"]) == {"0", "1", "2"}
    assert 0 <= report["losses"][0]["max_rel_diff"] < 0.05  # the same batches: bf16 stays near fp32


def test_report_reads_step_times_gpu_memory_and_mfu(tmp_path):
    report = load_report()
    run = tmp_path / "mt-bf16"
    (run / "csv").mkdir(parents=True)
    (run / "gpu_check.json").write_text(json.dumps({"task": "mt", "variant": "bf16", "steps": 4, "rc": 0,
                                                    "accelerator": "gpu", "wall_seconds": 30.0}))
    (run / "summary.json").write_text(json.dumps({"steps": 4, "monitor": {"metric": "val/bleu"},
                                                  "test": {"test/bleu": 12.5}}))
    peak = "DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.peak"
    lines = [f"step,train/batches,train/time,train/samples,train/loss,{peak}"]
    # cumulative seconds and tokens at the end of batches 1..4 (batch 3 not logged): steps of 1.0, 0.1, 0.1, 0.1 s
    for step, batch, time, samples, loss, allocated in [
        (0, 1, 1.0, 100, 5.0, 2**30), (1, 2, 1.1, 300, 4.0, 3 * 2**30), (3, 4, 1.3, 700, 3.0, 2**30),
    ]:
        lines.append(f"{step},{batch},{time},{samples},{loss},{allocated}")
    (run / "csv" / "metrics.csv").write_text("\n".join(lines) + "\n")
    (run / "nvidia_smi.csv").write_text("0, NVIDIA H100 80GB HBM3, 0\n0, NVIDIA H100 80GB HBM3, 4500\n")

    row = report.run_row(run, warmup=1, peak_override=None)
    assert row["steps_timed"] == 3 and row["median_step_ms"] == pytest.approx(100.0)
    assert row["tokens_per_s"] == pytest.approx(600 / 0.3)
    assert row["peak_allocated_mib"] == 3072 and row["nvidia_smi_peak_mib"] == 4500
    assert row["device"] == "NVIDIA H100 80GB HBM3" and row["peak_flops"] == 989e12
    assert row["test_metric"] == "test/bleu" and row["test_value"] == 12.5
    assert row["mfu"] is None and row["flops_note"] == "no config"  # no config_resolved.yaml: no FLOPs formula

    report._flops_cache.clear()
    report.flops_per_token = lambda _run: (1e9, "")  # 1 GFLOP a token: 2,000 tokens/s is 2 TFLOP/s
    row = report.run_row(run, warmup=1, peak_override=None)
    assert row["model_tflops_per_s"] == pytest.approx(2.0) and row["mfu"] == pytest.approx(2e12 / 989e12)
    assert "| mt | bf16 | ok | 4 | 100.0 | 2,000 | 3,072 | 4,500 | 2 | 0.20 % | bleu 12.5 | 30.0 |" in (
        report.table([row])
    )
