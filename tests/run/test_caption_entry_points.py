"""Captioning through the real entry points: train.py, eval.py and predict.py in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from attend.data.images import ShapeScenes
from tests.helpers.entry_points import assert_same_metrics, pngs, run
from tests.helpers.paths import ROOT

SMALL_SHAPES = [
    "task=caption",
    "data=shapes",
    "encoder=cnn",  # the small CNN from scratch (the task's default is a pretrained EfficientNet at 224 px)
    "data.source.n_train=256",
    "data.source.n_val=16",
    "data.source.n_test=16",
    "data.loader.eval_batch_size=16",
]
CAPTION_METRICS = {"test/bleu1", "test/bleu2", "test/bleu3", "test/bleu4", "test/cider", "test/loss"}


@pytest.mark.slow  # a train.py run of about 10 s: the slow tier (make test-slow; CI runs both)
def test_default_caption_task_reads_the_tux_paint_stamps(tmp_path):
    if not Path("/usr/share/tuxpaint/stamps").is_dir():
        pytest.skip("Debian package tuxpaint-stamps-default is not installed")
    # 64 px (2x2 cells): the frozen encoder's features of all 785 stamps are computed once at the start
    run("train.py", "task=caption", "debug=fast", "data.modality.image_size=64", f"hydra.run.dir={tmp_path}")
    metrics = json.loads((tmp_path / "test_metrics.json").read_text())
    assert CAPTION_METRICS <= set(metrics) and "test/pointing" not in metrics  # no boxes: no grounding
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and pngs(runs[0] / "files" / "media" / "images")  # plots reach W&B


def test_text_encoder_on_images_is_refused_at_start_up(tmp_path):
    result = subprocess.run(
        [sys.executable, "train.py", "task=caption", "encoder=rnn", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "gives image: choose an image encoder" in result.stderr


def test_caption_train_then_evaluate_and_predict_image_files(tmp_path):
    train_dir, eval_dir, predict_dir = tmp_path / "train", tmp_path / "eval", tmp_path / "predict"
    run(
        "train.py", *SMALL_SHAPES, "trainer.max_epochs=1", "trainer.limit_train_batches=4",
        "trainer.limit_val_batches=1", "callbacks.attention_plots.num_examples=1", "logger=csv",
        f"hydra.run.dir={train_dir}",
    )
    best = train_dir / "checkpoints" / "best.ckpt"
    assert best.is_file()

    result = run("eval.py", f"ckpt_path={best}", "num_plots=2", f"hydra.run.dir={eval_dir}")
    metrics = json.loads((eval_dir / "test_metrics.json").read_text())
    assert CAPTION_METRICS | {"test/pointing"} <= set(metrics)
    assert_same_metrics(metrics, json.loads((train_dir / "test_metrics.json").read_text()))  # train tested best.ckpt
    assert len(pngs(eval_dir / "attention" / "test")) == 2
    assert "test/cider" in result.stdout

    source = ShapeScenes(n_train=1, n_val=1, n_test=1)
    image = tmp_path / "scene.png"
    source.load_image(source.splits()["test"][0]).save(image)
    Image.new("RGBA", (40, 20), (255, 0, 0, 128)).save(tmp_path / "wide.png")
    result = run(
        "predict.py", f"ckpt_path={best}", f"inputs=[{image},{tmp_path / 'wide.png'}]", f"hydra.run.dir={predict_dir}"
    )
    lines = [line for line in result.stdout.splitlines() if "\t" in line]
    assert [line.split("\t")[0] for line in lines] == [str(image), str(tmp_path / "wide.png")]
    assert [p.name for p in pngs(predict_dir / "attention")] == ["input_0.png", "input_1.png"]

    missing = subprocess.run(
        [sys.executable, "predict.py", f"ckpt_path={best}", f"inputs=[{tmp_path / 'nope.jpg'}]",
         f"hydra.run.dir={tmp_path / 'predict-missing'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert missing.returncode != 0
    assert "nope.jpg" in missing.stderr and "does not exist" in missing.stderr
