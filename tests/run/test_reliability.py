"""Faults provoked on purpose: a run killed mid-epoch, preemption signals, determinism, NaN losses,
wrong config types, logger and plot failures. (A failing job in a sweep: tests/sweeps/test_sweeps.py.)"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import pytest
import torch

from attend.builder import build_datamodule, build_model
from attend.checkpoints.files import AtomicCheckpointIO, NonFiniteWeightsError
from attend.config.compose import compose_config
from attend.loggers.wandb_run import online_problem
from attend.model import NonFiniteLossError
from tests.helpers.entry_points import run, run_failing
from tests.helpers.paths import MULTI30K, ROOT
from tests.helpers.precision import nan_at
from tests.helpers.tiny_runs import TINY_MT

# two epochs of 12 batches, last.ckpt every 5 steps (5, 10, 15, 20: all inside an epoch), dropout on
RESUMABLE = [o for o in TINY_MT if not o.startswith(("debug=", "data.source.n_train"))] + [
    "data.source.n_train=400", "data.loader.batch_size=16", "logger.csv.flush_logs_every_n_steps=1",
    "trainer.log_every_n_steps=1", "run_test=false", "callbacks.attention_plots=null", "trainer.limit_val_batches=1",
    "trainer.max_epochs=2", "trainer.limit_train_batches=12", "callbacks.step_checkpoint.every_n_train_steps=5",
]


def train_losses(run_dir: Path) -> dict[int, float]:
    """step -> train/loss from the run's CSV log."""
    with (run_dir / "csv" / "metrics.csv").open() as handle:
        return {int(row["step"]): float(row["train/loss"]) for row in csv.DictReader(handle) if row.get("train/loss")}


def start(*overrides: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "train.py", *overrides], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def wait_for(condition, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the run ended before the fault:\n{process.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, "timed out waiting for the run"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("uninterrupted")
    run("train.py", *RESUMABLE, f"hydra.run.dir={folder}")
    return folder


def test_two_runs_with_the_same_seed_give_identical_losses(uninterrupted, tmp_path):
    run("train.py", *RESUMABLE, f"hydra.run.dir={tmp_path}")
    first, second = train_losses(uninterrupted), train_losses(tmp_path)
    assert len(first) == 24 and first == second  # every step, bit for bit


def test_a_run_killed_mid_epoch_resumes_where_its_last_checkpoint_was(uninterrupted, tmp_path):
    """kill -9 right after the first mid-epoch checkpoint; ckpt_path=<run folder> continues: the steps
    after the checkpoint, each once, with the uninterrupted run's losses (same batches, same dropout)."""
    killed, resumed = tmp_path / "killed", tmp_path / "resumed"
    process = start(*RESUMABLE, f"hydra.run.dir={killed}")
    wait_for(lambda: (killed / "checkpoints" / "last.ckpt").is_file(), process)
    process.send_signal(signal.SIGKILL)
    process.wait()
    checkpoint = torch.load(killed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    step = checkpoint["global_step"]
    assert step % 12 != 0 and checkpoint["attend_resume"]["batches_this_epoch"] == step % 12  # mid-epoch
    run("train.py", *RESUMABLE, f"ckpt_path={killed}", f"hydra.run.dir={resumed}")
    expected, got = train_losses(uninterrupted), train_losses(resumed)
    assert sorted(got) == list(range(step, 24))  # no step twice, none missing
    assert max(abs(expected[s] - got[s]) for s in got) <= 1e-6


# SIGUSR1 (SLURM's warning before a preemption) takes the same path as SIGTERM: the slow tier runs it
@pytest.mark.parametrize("signal_name", ["SIGTERM", pytest.param("SIGUSR1", marks=pytest.mark.slow)])
def test_a_preemption_signal_saves_a_checkpoint_and_exits_cleanly(signal_name, tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    process = start(*RESUMABLE, "run_test=true", f"hydra.run.dir={first}")
    wait_for(lambda: len(train_losses(first)) >= 2 if (first / "csv" / "metrics.csv").is_file() else False, process)
    process.send_signal(getattr(signal, signal_name))
    output = process.communicate(timeout=120)[0]
    assert process.returncode == 0, output[-3000:]
    assert f"{signal_name} received" in output and "resume with ckpt_path=" in output and "Traceback" not in output
    checkpoint = torch.load(first / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert 2 <= checkpoint["global_step"] < 24
    assert not (first / "test_metrics.json").exists()  # an unfinished run is not tested
    assert not list((first / "checkpoints").glob("*.tmp"))  # written to a temporary file, renamed into place
    if signal_name == "SIGTERM":  # running again resumes from it and finishes; last: the newest run's last.ckpt
        run("train.py", *RESUMABLE, "ckpt_path=last", f"hydra.run.dir={resumed}")
        assert sorted(train_losses(resumed)) == list(range(checkpoint["global_step"], 24))


def test_a_checkpoint_is_written_atomically_and_never_with_nan_weights(tmp_path):
    io = AtomicCheckpointIO()
    io.save_checkpoint({"state_dict": {"w": torch.ones(2)}}, tmp_path / "good.ckpt")
    assert [p.name for p in tmp_path.iterdir()] == ["good.ckpt"]
    with pytest.raises(NonFiniteWeightsError, match="the weight w holds NaN or inf"):
        io.save_checkpoint({"state_dict": {"w": torch.tensor([1.0, float("nan")])}}, tmp_path / "bad.ckpt")
    assert [p.name for p in tmp_path.iterdir()] == ["good.ckpt"]


def test_config_values_of_the_wrong_type_stop_at_start_up_naming_the_key():
    started = time.monotonic()
    result = run_failing(*TINY_MT, "encoder.hidden_size=abc", "optim.optimizer.lr=fast")
    elapsed = time.monotonic() - started
    output = result.stdout + result.stderr
    assert "encoder.hidden_size must be int, not 'abc'" in output and "optim.optimizer.lr must be" in output
    assert "pairs:" not in output and "Traceback" not in output  # refused before any data was read
    print(f"wrong types refused {elapsed:.1f} s after the process started")


def test_missing_checkpoint_is_named_with_the_fix(tmp_path):
    result = run_failing(*TINY_MT, f"ckpt_path={tmp_path / 'nope.ckpt'}")
    assert "no such checkpoint" in result.stderr and "ckpt_path=last" in result.stderr


def test_wandb_online_without_network_falls_back_to_offline(tmp_path):
    """An unroutable server: the run warns, logs offline and finishes instead of hanging."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "train.py", *TINY_MT, "logger=wandb", "logger.wandb.mode=online", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "WANDB_BASE_URL": "http://10.255.255.1:9", "WANDB_API_KEY": "x" * 40},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "W&B online logging is not possible" in result.stdout + result.stderr
    assert list((tmp_path / "wandb").glob("offline-run-*"))
    assert time.monotonic() - started < 120


def test_wandb_online_without_a_key_is_refused_before_wandb_starts(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc from `wandb login`
    assert online_problem().startswith("no API key for api.wandb.ai")


def test_a_failing_attention_plot_is_logged_once_and_training_goes_on(tmp_path):
    """image_attention cannot draw a text heatmap: two validation epochs fail to plot, the run finishes."""
    result = run(
        "train.py", *TINY_MT, "callbacks.attention_plots.plot._target_=attend.plots.image_attention",
        "trainer.max_epochs=2", "trainer.max_steps=-1", "trainer.limit_train_batches=2", f"hydra.run.dir={tmp_path}",
    )
    output = result.stdout + result.stderr
    assert output.count("drawing or logging the attention plots failed") == 1
    assert "failed at 2 validation epochs" in output
    assert (tmp_path / "summary.json").is_file()


def tiny_model():
    """The dates model and data of TINY_MT, built in this process."""
    cfg = compose_config([o for o in TINY_MT if not o.startswith(("debug=", "logger="))])
    datamodule = build_datamodule(cfg)
    datamodule.prepare_data()
    datamodule.setup("fit")
    return build_model(cfg, datamodule), datamodule


def fit(model, datamodule, steps: int) -> L.Trainer:
    trainer = L.Trainer(
        max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0,
    )
    trainer.fit(model, datamodule=datamodule)
    return trainer


def test_a_nan_loss_skips_its_step_and_training_goes_on():
    model, datamodule = tiny_model()
    nan_at(model, {1, 2})
    trainer = fit(model, datamodule, steps=4)
    assert model.nonfinite_steps == 2 and model.nonfinite_in_a_row == 0
    assert trainer.global_step == 4  # four real updates, over six batches
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert trainer.callback_metrics["train/nonfinite_skipped"] == 2


def test_nan_losses_in_a_row_stop_the_run_with_a_clear_error():
    model, datamodule = tiny_model()
    nan_at(model, set(range(100)))
    with pytest.raises(NonFiniteLossError, match="NaN or inf at 5 training steps in a row.*Lower optim.optimizer.lr"):
        fit(model, datamodule, steps=10)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_bad_lines_are_skipped_named_and_counted_in_the_run_logs(tmp_path):
    """A Multi30k-layout corpus with an empty and an undecodable training line: the run skips both, names
    them, and logs data/skipped_train (data.on_error and its limits: tests/data/test_bad_data.py)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(MULTI30K, corpus)
    with (corpus / "train.de").open("ab") as de, (corpus / "train.en").open("ab") as en:
        de.write(b"   \n" + b"Ein Hund \xff\xfe l\xe4uft.\n")
        en.write(b"A man waits.\n" + b"A dog runs.\n")
    result = run(
        "train.py", "data=parallel_text", f"data.source.root={corpus}", "data.modality.tokenizer.vocab_size=60",
        "data.tokenizer.vocab_size=60", f"paths.cache_dir={tmp_path / 'cache'}", "debug=fast", "logger=csv",
        "encoder.embedding_dim=16", "encoder.hidden_size=32", "decoder.embedding_dim=16", "decoder.hidden_size=64",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    output = result.stdout + result.stderr
    assert "train.de:32: the line is only whitespace" in output  # each named by file and line number
    assert "train.de:33: not valid UTF-8" in output
    with (tmp_path / "run" / "csv" / "metrics.csv").open() as handle:
        logged = [row for row in csv.DictReader(handle) if row.get("data/skipped_train")]
    assert float(logged[0]["data/skipped_train"]) == 3  # ours and the empty line the fixture has on purpose
