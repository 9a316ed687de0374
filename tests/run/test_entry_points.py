"""The real entry points, as a user runs them: train.py, eval.py, predict.py in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from attend.data import DatePairs
from tests.helpers.entry_points import assert_same_metrics, pngs, run
from tests.helpers.paths import ROOT
from tests.helpers.tiny_runs import TINY_DATES

# debug=fast keeps the task's model; these runs shrink it (decoder hidden = 2 x 32 encoder outputs)
SMALL_MT = ["encoder.embedding_dim=32", "encoder.hidden_size=32", "decoder.embedding_dim=32", "decoder.hidden_size=64"]


def test_default_logger_is_offline_wandb_with_images(tmp_path):
    run("train.py", "debug=fast", *SMALL_MT, "decoder=bahdanau", "run_test=false", f"hydra.run.dir={tmp_path}")
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert pngs(runs[0] / "files" / "media" / "images"), "attention plots were not logged to W&B"
    pages = sorted((tmp_path / "attention" / "epoch_000").glob("example_*.html"))  # the explorer beside the plots
    media = sorted((runs[0] / "files" / "media" / "html").rglob("*.html"))
    assert len(pages) == 2 and len(media) == 2, "the explorer pages were not saved and logged to W&B as HTML"
    assert media[0].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")  # whole, no stylesheet injected
    assert (tmp_path / "csv" / "metrics.csv").is_file()  # CSV alongside


@pytest.mark.slow  # a train.py run of about 10 s: the slow tier (make test-slow; CI runs both)
def test_tensorboard_logger_receives_figures(tmp_path):
    run("train.py", "debug=fast", *SMALL_MT, "logger=tensorboard", "run_test=false", f"hydra.run.dir={tmp_path}")
    (events,) = (tmp_path / "tensorboard").rglob("events.out.tfevents.*")
    records = events.read_bytes()
    assert b"val/attention/0" in records and b"val/samples" in records  # the figures and the samples text
    assert b"val/explorer/example_0" in records and b"GIF89a" in records  # the explorer's steps, animated


def test_train_then_evaluate_and_predict_from_the_checkpoint(tmp_path):
    train_dir, eval_dir = tmp_path / "train", tmp_path / "eval"
    # train tests best.ckpt with a beam of 2 in bf16-mixed (trainer=gpu's precision, on the CPU here); eval.py's
    # decoding.beam_size=2 then searches the same way and its Trainer takes the checkpoint's precision
    trained = run(
        "train.py", *TINY_DATES, "decoding.beam_size=2", "trainer.precision=bf16-mixed", f"hydra.run.dir={train_dir}"
    )
    best = train_dir / "checkpoints" / "best.ckpt"
    assert best.is_file() and (train_dir / "checkpoints" / "last.ckpt").is_file()
    summary = json.loads((train_dir / "summary.json").read_text())
    assert summary["choices"]["data"] == "dates" and summary["epochs"] == 1 and summary["fit_seconds"] > 0
    assert "val/exact" in summary["val"] and "test/exact" in summary["test"]
    metric = summary["monitor"]["metric"]  # one epoch: the best value is the last one
    assert abs(summary["monitor"]["best"] - summary["val"][metric]) < 1e-4
    # the RunSummary callback's three files, and where everything landed on the terminal
    assert json.loads((train_dir / "test_metrics.json").read_text()) == summary["test"]
    tested = (train_dir / "test_predictions.tsv").read_text(encoding="utf-8").splitlines()
    assert tested[0] == "source\treference\thypothesis" and len(tested) == 1 + 64
    assert "=== Attend run finished ===" in trained.stdout and f"run folder:      {train_dir}" in trained.stdout

    result = run("eval.py", f"ckpt_path={best}", "decoding.beam_size=2", f"hydra.run.dir={eval_dir}")
    metrics = json.loads((eval_dir / "test_metrics.json").read_text())
    assert_same_metrics(metrics, json.loads((train_dir / "test_metrics.json").read_text()))
    rows = (eval_dir / "test_predictions.tsv").read_text(encoding="utf-8").splitlines()[1:]
    expected = [item[0] for item in DatePairs(n_train=2000, n_val=64, n_test=64, seed=1234).splits()["test"]]
    assert [row.split("\t")[0] for row in rows] == expected  # every test pair, in file order
    assert len(pngs(eval_dir / "attention" / "test")) == 4
    assert "test/bleu" in result.stdout

    inputs = tmp_path / "inputs.txt"
    inputs.write_text("3 March 1999\n\n12/25/07\n", encoding="utf-8")
    output = tmp_path / "outputs.txt"
    result = run(
        "predict.py", f"ckpt_path={best}", "inputs=[1 Jan 2000]", f"input_file={inputs}",
        f"output_file={output}", f"hydra.run.dir={tmp_path / 'predict'}",
    )
    assert len(output.read_text().splitlines()) == 3  # blank input lines are skipped
    decoded = [line for line in result.stdout.splitlines() if "\t" in line]
    assert [line.split("\t")[0] for line in decoded] == ["1 Jan 2000", "3 March 1999", "12/25/07"]


def test_eval_names_a_missing_checkpoint(tmp_path):
    result = subprocess.run(
        [sys.executable, "eval.py", f"ckpt_path={tmp_path}/nope.ckpt", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "nope.ckpt" in result.stderr and "does not exist" in result.stderr


@pytest.mark.slow
def test_hparams_grid_sweep_runs_every_combination_in_its_own_folder(tmp_path):
    # the command line replaces the grid's list of learning rates: 2 rates x 2 dropouts = 4 jobs
    result = run(
        "train.py", "-m", "hparams_search=mt_grid", "optim.optimizer.lr=0.001,0.004", "debug=fast", *SMALL_MT,
        "logger=csv", "run_test=false", f"hydra.sweep.dir={tmp_path}", timeout=600,
    )
    jobs = sorted(p.parent for p in tmp_path.glob("*/summary.json"))
    assert len(jobs) == 4, result.stdout[-2000:]
    settings = set()
    for job in jobs:
        config = OmegaConf.load(job / "config_resolved.yaml")
        settings.add((config.optim.optimizer.lr, config.encoder.dropout))
    assert settings == {(lr, dropout) for lr in (0.001, 0.004) for dropout in (0.2, 0.3)}


@pytest.mark.slow  # a train.py run of about 10 s: the slow tier (make test-slow; CI runs both)
def test_last_checkpoint_is_the_last_epoch_even_when_the_best_is_earlier(tmp_path):
    import torch

    # "max" of a falling loss keeps the first epoch as best; last.ckpt must still follow the run
    run("train.py", *TINY_DATES, "trainer.max_epochs=3", "trainer.limit_train_batches=2", "run_test=false",
        "monitor.metric=val/loss",
        "monitor.mode=max", f"hydra.run.dir={tmp_path}")
    best, last = (torch.load(tmp_path / "checkpoints" / f"{name}.ckpt", map_location="cpu", weights_only=False)
                  for name in ("best", "last"))
    assert best["epoch"] == 0
    assert last["epoch"] == 2 and last["global_step"] == 6
