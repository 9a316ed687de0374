"""scripts/bench_scale.py end to end on tiny corpora, and its generated corpora read by the real sources.

The text run (baseline 30, sizes 60 and 120: six fresh processes) takes about 45 s on 2 cores; the image and
audio run takes about 80 s more, so it runs only with ATTEND_BENCH_SCALE_ALL=1.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

SCRIPT = ROOT / "scripts" / "bench_scale.py"
sys.path.insert(0, str(ROOT / "scripts"))

import bench_scale  # noqa: E402
import bench_scale_corpora as corpora  # noqa: E402

ROW_FIGURES = ("prep_s", "first_start_s", "first_rss_mb", "delta_rss_mb", "second_start_s", "second_rss_mb",
               "loader_w0_ex_s", "loader_w1_ex_s", "loader_w2_ex_s", "model_ex_s")


def run_script(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "results.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--root", str(tmp_path / "corpora"), "--out", str(out),
         "--work", str(tmp_path / "work"), *options],
        cwd=ROOT, capture_output=True, text=True, timeout=400, env=env,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run, json.loads(out.read_text())


# where each figure of a row is, read here without the script's readers: (phase, key[, loader workers])
WHERE = {"prep_s": ("first", "prep_s"), "first_start_s": ("first", "first_step_s"),
         "first_rss_mb": ("first", "peak_rss_mb"), "second_start_s": ("second", "first_step_s"),
         "second_rss_mb": ("second", "peak_rss_mb"), "loader_w0_ex_s": ("second", "loader_examples_per_s", "0"),
         "loader_w1_ex_s": ("second", "loader_examples_per_s", "1"),
         "loader_w2_ex_s": ("second", "loader_examples_per_s", "2"), "model_ex_s": ("second", "model_examples_per_s")}


EXAMPLES_PER_ITEM = {"text": 1, "images": 5, "audio": 1}  # training examples per generated item: 5 captions an image


def figure(row: dict, name: str) -> float:
    if name == "delta_rss_mb":
        return row["delta_rss_mb"]
    phase, key, *workers = WHERE[name]
    value = row[phase][key]
    return value[workers[0]] if workers else value


def check_measurements(row: dict, modality: str) -> None:
    """One size's figures are what its two starts measured, and agree with each other."""
    first, second = row["first"], row["second"]
    assert "error" not in first and "error" not in second, row
    examples = row["size"] * EXAMPLES_PER_ITEM[modality]
    for start in (first, second):
        assert start["train_examples"] == examples  # the whole training split of the generated corpus
        assert start["prep_s"] >= start["prepare_data_s"] > 0
        # from the process's start: the imports, then the preparation, then one step
        assert start["first_step_s"] > start["import_s"] + start["prep_s"]
        assert start["peak_rss_mb"] == pytest.approx(start["self_rss_mb"] + start["children_rss_mb"])
        assert start["self_rss_mb"] > 100  # torch and Lightning alone take more
    assert 0 < second["examples_per_step"] <= examples and second["step_s"] > 0
    assert second["model_examples_per_s"] == pytest.approx(second["examples_per_step"] / second["step_s"])
    assert set(second["loader_examples_per_s"]) == {"0", "1", "2", str(second["configured_workers"])}
    assert all(rate > 0 for rate in second["loader_examples_per_s"].values())


def check_modality(stdout: str, results: dict, modality: str, sizes: list[int]) -> None:
    """Every figure measured and consistent, the slopes and goals computed from them, PASS/FAIL their verdicts
    against the limits, and the printed tables and lines the JSON's."""
    summary = results["modalities"][modality]
    baseline, rows = summary["baseline"], summary["rows"]
    assert [row["size"] for row in rows] == sizes
    assert set(bench_scale.FIGURES) == set(WHERE) | {"delta_rss_mb"}
    assert f"## {modality}" in stdout
    for row in [baseline, *rows]:
        check_measurements(row, modality)
        assert row["delta_rss_mb"] == pytest.approx(figure(row, "first_rss_mb") - figure(baseline, "first_rss_mb"))
        for name in ROW_FIGURES:
            assert bench_scale.FIGURES[name](row) == figure(row, name), (modality, row["size"], name)
        label = f"{row['size']:,}" + (" (baseline)" if row is baseline else "")
        shown = (f"| {label} | {figure(row, 'prep_s'):,.2f} | {figure(row, 'first_start_s'):,.2f} | "
                 f"{figure(row, 'first_rss_mb'):,.1f} | {figure(row, 'delta_rss_mb'):,.1f} | "
                 f"{figure(row, 'second_start_s'):,.2f} |")
        assert shown in stdout, shown
    assert baseline["delta_rss_mb"] == 0
    # log-log slopes between the smallest and the largest size (with one size: the baseline and it)
    low, high = (rows[0], rows[-1]) if len(rows) >= 2 else (baseline, rows[0])
    for name in bench_scale.FIGURES:
        y0, y1 = figure(low, name), figure(high, name)
        expected = math.log(y1 / y0) / math.log(high["size"] / low["size"]) if y0 > 0 and y1 > 0 else None
        assert summary["slopes"][name] == (None if expected is None else pytest.approx(expected)), name
        shown = "-" if expected is None else f"{expected:,.2f}"
        assert f"growth {modality} {name}: log-log slope {shown} (" in stdout
    limits = bench_scale.LIMITS
    largest = rows[-1]
    workers = str(largest["second"]["configured_workers"])
    verdicts = [  # (value, pass) of each goal, in the script's order
        (summary["slopes"]["prep_s"], summary["slopes"]["prep_s"] <= limits["prep_slope"]),
        (max(figure(row, "second_start_s") for row in rows),
         max(figure(row, "second_start_s") for row in rows) < limits["second_start_s"]),
        *([(largest["delta_rss_mb"], largest["delta_rss_mb"] < limits["delta_rss_mb"])]
          if modality in ("text", "images") else []),
        (largest["second"]["loader_examples_per_s"][workers] / figure(largest, "model_ex_s"),
         largest["second"]["loader_examples_per_s"][workers] >= figure(largest, "model_ex_s")),
    ]
    assert len(summary["goals"]) == len(verdicts) == (4 if modality in ("text", "images") else 3)
    for goal, (value, passed) in zip(summary["goals"], verdicts, strict=True):
        assert goal["value"] == pytest.approx(value) and goal["pass"] == passed, goal
        line = f"{'PASS' if passed else 'FAIL'} {modality}: {goal['goal']}: {value:,.2f}"
        assert line in stdout, line


@pytest.mark.slow
def test_quick_text_has_every_figure(tmp_path: Path) -> None:
    run, results = run_script(tmp_path, "--modalities", "text", "--text-sizes", "60,120")
    check_modality(run.stdout, results, "text", [60, 120])
    # the corpora are kept and reused: a second generation finds them done
    folder = corpora.corpus_dir(tmp_path / "corpora", "text", 60, 20, 20)
    assert (folder / corpora.DONE).is_file()
    assert corpora.ensure(tmp_path / "corpora", "text", 60, 20, 20)[1] == 0.0


@pytest.mark.skipif(os.environ.get("ATTEND_BENCH_SCALE_ALL") != "1", reason="about 80 s: ATTEND_BENCH_SCALE_ALL=1")
def test_quick_images_and_audio_have_every_figure(tmp_path: Path) -> None:
    run, results = run_script(tmp_path, "--modalities", "images,audio", "--images-sizes", "12",
                              "--audio-sizes", "8")
    check_modality(run.stdout, results, "images", [12])
    check_modality(run.stdout, results, "audio", [8])


def test_generated_corpora_are_read_by_the_real_sources(tmp_path: Path) -> None:
    from attend.data.audio.librispeech import LibriSpeech
    from attend.data.images.karpathy import KarpathyJSON
    from attend.data.text.parallel_text import ParallelText

    text = corpora.paths_for("text", corpora.ensure(tmp_path, "text", 40, 5, 5)[0])
    splits = ParallelText(text["root"]).splits()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [40, 5, 5]
    assert all(5 <= len(de.split()) == len(en.split()) <= 30 for de, en in splits["train"])

    images = corpora.paths_for("images", corpora.ensure(tmp_path, "images", 7, 2, 3)[0])
    source = KarpathyJSON(images["path"], images["image_root"])
    records = source.splits()
    assert [len(records[s]) for s in ("train", "val", "test")] == [7, 2, 3]
    assert all(len(record.captions) == 5 for record in records["train"])
    assert source.load_image(records["train"][0]).size == (corpora.IMAGE_WIDTH, corpora.IMAGE_HEIGHT)

    audio = corpora.paths_for("audio", corpora.ensure(tmp_path, "audio", 6, 2, 2)[0])
    utterances = LibriSpeech(audio["root"]).splits()
    assert [len(utterances[s]) for s in ("train", "val", "test")] == [6, 2, 2]
    assert all(Path(u.path).is_file() and u.text for u in utterances["train"])


def test_slope_and_goals() -> None:
    rows = [{"size": 100, "first": {"prep_s": 1.0}}, {"size": 10_000, "first": {"prep_s": 100.0}}]
    assert bench_scale.slope(rows, bench_scale.FIGURES["prep_s"]) == pytest.approx(1.0)
    assert bench_scale.growth(1.0) == "~linear" and bench_scale.growth(0.0) == "~flat"
    assert bench_scale.growth(None) == "n/a"
    rows[1]["first"] = {"error": "boom"}
    assert bench_scale.slope(rows, bench_scale.FIGURES["prep_s"]) is None


@pytest.mark.parametrize("sizes", ["10k", "0,100", ","])
def test_bad_sizes_are_a_usage_error_not_a_traceback(sizes: str) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--modalities", "text", f"--text-sizes={sizes}"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2 and "--text-sizes" in result.stderr and "Traceback" not in result.stderr
