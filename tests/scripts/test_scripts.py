"""scripts/ run as a user runs them."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import pytest

from tests.helpers.entry_points import run
from tests.helpers.paths import ROOT
from tests.helpers.tiny_runs import TINY_DATES


@pytest.mark.slow  # a script's own process (10-20 s here): the slow tier, which CI runs too
def test_profile_step_prints_throughput_and_the_top_operators():
    overrides = [o for o in TINY_DATES if not o.startswith("trainer.")]
    result = run("scripts/profile_step.py", *overrides, "--warmup", "1", "--steps", "3", "--top", "5")
    match = re.search(r"(\d+) target tokens/s\s+([\d.]+) ms/step", result.stdout)
    assert match and int(match.group(1)) > 0 and float(match.group(2)) > 0, result.stdout
    assert "Self CPU" in result.stdout  # the profiler's table


@pytest.mark.slow
def test_thread_table_prints_a_row_of_rates_for_each_task_and_machine_state():
    overrides = [o for o in TINY_DATES if not o.startswith("trainer.")]
    result = run("scripts/thread_table.py", "--tasks", "mt", "--conditions", "quiet", "busy", "--steps", "3",
                 *overrides)
    rows = re.findall(r"^\| mt \| (quiet|busy) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \|$", result.stdout, re.MULTILINE)
    assert [row[0] for row in rows] == ["quiet", "busy"], result.stdout
    assert all(int(value.replace(",", "")) > 0 for row in rows for value in row[1:])


@pytest.mark.slow  # a script's own process (10-20 s here): the slow tier, which CI runs too
def test_profile_step_runs_on_the_threads_the_config_sets():
    # train.py sets PyTorch's threads from `threads`; the timings must be of the same setting
    overrides = [o for o in TINY_DATES if not o.startswith("trainer.")] + ["threads=3"]
    result = run("scripts/profile_step.py", *overrides, "--warmup", "1", "--steps", "2", "--top", "0")
    assert result.stdout.startswith("threads 3 ") or "\nthreads 3 " in result.stdout, result.stdout


@pytest.mark.slow  # a script's own process (10-20 s here): the slow tier, which CI runs too
def test_profile_step_cycles_a_split_shorter_than_the_steps_asked_for():
    overrides = [o for o in TINY_DATES if not o.startswith("trainer.")] + ["data.source.n_train=200"]
    result = run("scripts/profile_step.py", *overrides, "--warmup", "2", "--steps", "8", "--top", "0")
    assert "ms/step" in result.stdout


@pytest.mark.slow  # a script's own process (10-20 s here): the slow tier, which CI runs too
def test_profile_step_names_a_bad_override_and_a_missing_value():
    for overrides, expected in (
        (["attention=nope"], "Could not find 'attention/nope'"),
        (["data=parallel_text"], "data.source.root"),
    ):
        result = subprocess.run(
            [sys.executable, "scripts/profile_step.py", *overrides], cwd=ROOT, capture_output=True, text=True,
            timeout=120,
        )
        assert result.returncode != 0
        assert result.stderr.startswith("profile_step.py: ") and expected in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.slow  # a script's own process (10-20 s here): the slow tier, which CI runs too
def test_attention_memory_benchmark_prints_both_modes():
    result = run("scripts/bench_attention_memory.py", "--batch", "2", "--steps", "8", "--frames", "50", "--hidden",
                 "16", "--max-elements", "1000")
    assert "12,800 elements" in result.stdout
    assert re.search(r"at once: +[\d.]+ s forward \+ backward, peak memory \+[\d,]+ MB", result.stdout)
    assert re.search(r"chunks of <= 1,000: +[\d.]+ s", result.stdout), result.stdout


def write_summary(folder, attention, exact, seconds):
    folder.mkdir(parents=True)
    summary = {
        "choices": {"task": "mt", "data": "dates", "attention": attention, "decoder": "luong"},
        "fit_seconds": seconds, "epochs": 4, "steps": 628, "parameters": 667_000,
        "monitor": {"metric": "val/exact", "best": exact}, "test": {"test/exact": exact, "test/loss": 0.01},
    }
    (folder / "summary.json").write_text(json.dumps(summary))


def test_compare_runs_tables_a_sweep_and_fills_the_readme_section(tmp_path):
    sweep = tmp_path / "sweep"
    for job, (attention, exact) in enumerate([("additive", 99.1), ("dot", 98.5)] + [("cosine", 97.0)] * 9):
        write_summary(sweep / str(job), attention, exact, 185.4)
    write_summary(sweep / "transformer", "multihead", 99.5, 300.0)
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- compare:dates -->\nold table\n<!-- /compare:dates -->\nend\n")
    result = run(
        "scripts/compare_runs.py", str(sweep), "--metrics", "test/exact", "--out", str(tmp_path / "table"),
        "--readme", str(readme), "--section", "dates",
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "| attention | test/exact | training time | epochs | parameters |"  # only what varies
    assert lines[2] == "| additive | 99.10 | 3 min 05 s | 4 | 0.67 M |"
    assert lines[-1].startswith("| multihead | 99.50 | 5 min 00 s")  # job 10 before it, named folders last
    assert lines[-2].startswith("| cosine |") and len(lines) == 2 + 12
    assert (tmp_path / "table.csv").read_text().splitlines()[1].startswith("additive,99.10,")
    # the main metric (the monitored val/exact, on test) as bars; the grid says where a run drew no plot
    assert (tmp_path / "table_test_exact.png").stat().st_size > 5_000
    assert (tmp_path / "table_attention.png").stat().st_size > 5_000
    content = readme.read_text()
    assert "old table" not in content and "| additive | 99.10 |" in content
    assert content.startswith("intro\n<!-- compare:dates -->\n|") and content.endswith("<!-- /compare:dates -->\nend\n")


def test_compare_runs_says_what_is_missing(tmp_path):
    result = subprocess.run(
        [sys.executable, "scripts/compare_runs.py", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode != 0 and "no summary.json" in result.stderr and "did the runs finish" in result.stderr
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "summary.json").write_text('{"choices": {')  # cut short
    result = subprocess.run(
        [sys.executable, "scripts/compare_runs.py", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode != 0 and "0/summary.json is not a summary" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_epoch_ablation_stops_each_variant_after_the_epochs_asked_for(tmp_path):
    """Two variants of a tiny dates model, each stopped after its second validation of a 50-epoch schedule."""
    kept = [o for o in TINY_DATES if not o.startswith(("trainer.max_epochs", "trainer.limit_train_batches"))]
    common = " ".join(kept) + " trainer.max_epochs=50 trainer.limit_train_batches=30"
    result = run(
        "scripts/epoch_ablation.py", "--epochs", "2", "--parallel", "2", "--metric", "val/exact",
        "--common", common, "--out", str(tmp_path), "glorot=", "pytorch=model.init=pytorch",
    )
    rows = [line for line in result.stdout.splitlines() if line.startswith(("| glorot", "| pytorch"))]
    assert len(rows) == 2, result.stdout
    for row in rows:
        after_each_epoch, loss = row.split("|")[2:4]
        assert len(after_each_epoch.split(" / ")) == 2 and float(loss) > 0
    for name in ("glorot", "pytorch"):  # stopped long before the 50 epochs
        with (tmp_path / name / "csv" / "metrics.csv").open(newline="") as f:
            validated = [row for row in csv.DictReader(f) if row.get("val/exact")]
        assert 2 <= len(validated) < 10
        assert not (tmp_path / name / "test_metrics.json").exists()


@pytest.mark.slow
def test_speed_perturbation_benchmark_prints_first_and_cached_starts():
    small = ["experiment=espeak_numbers", "data.source.n_train=8", "data.source.n_val=2", "data.source.n_test=2"]
    result = run("scripts/bench_speed_perturb.py", *small)
    rows = [line.split() for line in result.stdout.splitlines()[1:] if line.strip()]
    assert [row[0] for row in rows] == ["without", "speeds"] and all(float(row[-3]) > 0 for row in rows)


def test_follow_cfg_lists_the_stops_of_evals_config_and_counts_them():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "follow_cfg.py")], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    summary = re.fullmatch(r"stops (\d+) modules (\d+) turns back (\d+)", lines[-1])
    assert summary, lines[-1]
    stops = [line for line in lines if line.startswith("attend.")]
    assert stops[0] == "attend.run.evaluate.evaluate" and int(summary[1]) == len(stops)
    assert "attend.checkpoints.saved_run.load_run" in stops  # eval.py reads the checkpoint through the one function
    assert int(summary[1]) <= 12 and int(summary[3]) <= 4  # issue 40's bounds


def budget_run(folder, rates, used, total=720):
    """A run folder as a time-budgeted train.py leaves it: csv/metrics.csv, train.log, config and summary."""
    (folder / "csv").mkdir(parents=True)
    lines = ["epoch,lr-AdamW,step,val/bleu", "0,,0,"] + [f"0,{rate},{step},," for step, rate in enumerate(rates)]
    (folder / "csv" / "metrics.csv").write_text("\n".join(lines) + "\n")
    (folder / "train.log").write_text(
        f"[x][attend.callbacks.time_budget][INFO] - time budget: training stops at step {len(rates)} (epoch 3), "
        f"{used} s of {total} s used, {total - used} s kept for a last validation and its checkpoints\n")
    (folder / "config_resolved.yaml").write_text('trainer:\n  max_time: "00:00:12:00"\n')
    (folder / "summary.json").write_text(json.dumps({"fit_seconds": used + 5}))
    return folder


def test_budget_check_passes_a_run_that_kept_its_budget_and_names_the_failures(tmp_path):
    warm_then_decay = [0.001, 0.002, 0.003, 0.0025, 0.001, 0.00015]
    good = budget_run(tmp_path / "good", warm_then_decay, used=713)
    rising = budget_run(tmp_path / "rising", [0.001, 0.003, 0.001, 0.002, 0.0005], used=713)
    early = budget_run(tmp_path / "early", warm_then_decay, used=690)
    command = [sys.executable, "scripts/budget_check.py"]
    result = subprocess.run([*command, str(good)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "ok: lr peak 0.003, last 0.00015, largest rise after the peak 0;" in result.stdout
    assert "713 s of 720 s (7 s left, at most 15); fit 718 s" in result.stdout
    result = subprocess.run([*command, str(good), str(rising), str(early)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "rising: FAILS" in lines[1] and "largest rise after the peak 0.001;" in lines[1]
    assert "early: FAILS" in lines[2] and "(30 s left, at most 15)" in lines[2]
