"""scripts/bench_scale.py end to end on tiny corpora, and its generated corpora read by the real sources.

The text run (baseline 30, sizes 60 and 120: six fresh processes) takes about 45 s on 2 cores; the image and
audio run takes about 80 s more, so it runs only with ATTEND_BENCH_SCALE_ALL=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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


def check_modality(stdout: str, results: dict, modality: str, sizes: list[int]) -> None:
    summary = results["modalities"][modality]
    assert [row["size"] for row in summary["rows"]] == sizes
    for row in [summary["baseline"], *summary["rows"]]:
        assert "error" not in row["first"] and "error" not in row["second"], row
        for name in ROW_FIGURES:
            assert bench_scale.FIGURES[name](row) is not None, (modality, row["size"], name)
        assert bench_scale.FIGURES["prep_s"](row) > 0 and bench_scale.FIGURES["first_rss_mb"](row) > 0
        assert bench_scale.FIGURES["model_ex_s"](row) > 0
        assert str(row["second"]["configured_workers"]) in row["second"]["loader_examples_per_s"]
    assert summary["baseline"]["delta_rss_mb"] == 0
    assert set(summary["slopes"]) == set(bench_scale.FIGURES)
    assert summary["slopes"]["prep_s"] is not None and summary["slopes"]["first_rss_mb"] is not None
    goals = [goal["goal"] for goal in summary["goals"]]
    assert len(goals) == (4 if modality in ("text", "images") else 3)
    assert f"## {modality}" in stdout
    for size in sizes:
        assert f"| {size:,} |" in stdout
    for name in bench_scale.FIGURES:
        assert f"growth {modality} {name}: log-log slope" in stdout
    for goal in goals:
        assert f"PASS {modality}: {goal}" in stdout or f"FAIL {modality}: {goal}" in stdout


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
