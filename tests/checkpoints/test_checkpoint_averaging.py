"""Checkpoint averaging (average_checkpoints): the right checkpoints are chosen, their floating-point weights are
averaged and their integer buffers taken from the newest; training's test and eval.py run on the average."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from attend.checkpoints.averaging import AVERAGED_FILE, AverageOptions, average_kept, average_state_dicts, kept_folder
from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.run.evaluate import evaluate
from tests.helpers.paths import ROOT

STATE_KEY = "KeepForAveraging{'monitor': 'val/bleu', 'mode': 'max'}"  # any key: the state is found by its fields


def tiny_state(seed: int, batches: int) -> dict:
    """The state dict of a small model with a BatchNorm (float running statistics, an integer batch count)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    model[1].running_mean.normal_()
    model[1].num_batches_tracked.fill_(batches)
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def save_kept(folder: Path, epoch: int, score: float, select: str = "best", mode: str = "max") -> Path:
    """A checkpoint as KeepForAveraging writes it: its state names what it was kept for and its own score."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"epoch={epoch}-step={10 * (epoch + 1)}.ckpt"
    torch.save({
        "epoch": epoch, "global_step": 10 * (epoch + 1), "state_dict": tiny_state(epoch, 10 * (epoch + 1)),
        "callbacks": {STATE_KEY: {"average_select": select, "average_mode": mode,
                                  "current_score": torch.tensor(score)}},
        "optimizer_states": [{"state": {}}], "lr_schedulers": [], "attend": {"config": {"epoch": epoch}},
    }, path)
    return path


@pytest.fixture
def three(tmp_path) -> Path:
    """Three kept checkpoints: epochs 0, 1, 2 scoring 5, 9, 7 (higher is better)."""
    folder = tmp_path / "checkpoints" / "average"
    for epoch, score in enumerate((5.0, 9.0, 7.0)):
        save_kept(folder, epoch, score)
    return folder


def weights(folder: Path, epochs: list[int]) -> list[dict]:
    return [torch.load(next(folder.glob(f"epoch={e}-*.ckpt")), weights_only=False)["state_dict"] for e in epochs]


def test_the_average_is_the_mean_of_the_best_checkpoints_and_integer_buffers_are_the_newest(three):
    averaged, said = average_kept(three, AverageOptions("best", 2))
    chosen = weights(three, [1, 2])  # scores 9 and 7; epoch 0 (5) is left out
    for name, tensor in averaged["state_dict"].items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, (chosen[0][name] + chosen[1][name]) / 2)
        else:  # num_batches_tracked: the newest chosen checkpoint's, not a mean
            assert tensor.dtype == torch.long and int(tensor) == 30
    assert said == "the average of 2 best checkpoints: epoch=1-step=20, epoch=2-step=30"
    assert averaged["attend"]["averaged_from"] == ["epoch=1-step=20.ckpt", "epoch=2-step=30.ckpt"]
    assert averaged["epoch"] == 2 and averaged["attend"]["config"] == {"epoch": 2}  # the rest: the newest's
    assert "optimizer_states" not in averaged and "lr_schedulers" not in averaged


def test_last_n_are_the_latest_epochs_and_best_follows_the_mode(tmp_path):
    folder = tmp_path / "last"
    for epoch in range(3):
        save_kept(folder, epoch, float(10 * (epoch + 1)), select="last")
    averaged, said = average_kept(folder, AverageOptions("last", 2))
    assert said == "the average of 2 last checkpoints: epoch=1-step=20, epoch=2-step=30"
    lowest = tmp_path / "min"
    for epoch, loss in enumerate((0.5, 0.9, 0.7)):
        save_kept(lowest, epoch, loss, mode="min")
    _, said = average_kept(lowest, AverageOptions("best", 2))
    assert said.endswith("epoch=0-step=10, epoch=2-step=30")  # the two lowest losses, oldest first


def test_floats_are_averaged_in_their_own_dtype_and_integers_are_the_newest():
    states = [{"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)},
              {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(4)},
              {"w": torch.tensor([5.0, 1.0], dtype=torch.bfloat16), "n": torch.tensor(5)}]
    averaged = average_state_dicts(states)
    assert averaged["w"].dtype == torch.bfloat16 and averaged["w"].tolist() == [3.0, 3.0]
    assert int(averaged["n"]) == 5


def test_fewer_kept_than_n_averages_those_there_are_and_says_so(three, caplog):
    with caplog.at_level(logging.INFO, logger="attend.checkpoints.averaging"):
        _, said = average_kept(three, AverageOptions("best", 5))
    assert said.startswith("the average of 3 best checkpoints")
    assert "average_checkpoints.n=5, but" in caplog.text and "averaging those 3" in caplog.text


def test_no_checkpoints_or_the_other_selection_is_a_one_line_error(tmp_path, three):
    with pytest.raises(ConfigError, match="no checkpoints to average") as error:
        average_kept(tmp_path / "nothing", AverageOptions("best", 2))
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="average_checkpoints.select=best") as error:
        average_kept(three, AverageOptions("last", 2))  # kept for best: their scores are no steps
    assert "\n" not in str(error.value)


def test_the_kept_folder_is_found_from_any_checkpoint_of_the_run(tmp_path):
    assert kept_folder(tmp_path / "checkpoints" / "best.ckpt") == tmp_path / "checkpoints" / "average"
    kept = tmp_path / "checkpoints" / "average"
    assert kept_folder(kept / "epoch=1-step=2.ckpt") == kept


@pytest.mark.parametrize(("overrides", "message"), [
    (["average_checkpoints.select=worst"], "average_checkpoints.select must be best or last"),
    (["average_checkpoints.select=best", "average_checkpoints.n=0"], "average_checkpoints.n must be a whole number"),
    (["average_checkpoints.select=last", "debug=fast"], "average_checkpoints needs checkpoints"),
])
def test_bad_averaging_options_are_refused_at_start_up(overrides, message, tmp_path):
    with pytest.raises(ConfigError, match=message) as error:
        check_config(compose_config(["data=dates", *overrides], output_dir=tmp_path))
    assert "\n" not in str(error.value)
    check_config(compose_config(["data=dates", "average_checkpoints.select=best"], output_dir=tmp_path))  # a good one


TINY_DATES = [
    "data=dates", "data.source.n_train=2000", "data.source.n_val=64", "data.source.n_test=64",
    "encoder.embedding_dim=16", "encoder.hidden_size=32", "decoder.embedding_dim=16", "decoder.hidden_size=64",
    "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "logger=csv",
]


def test_training_tests_the_average_and_eval_py_averages_the_same_checkpoints(tmp_path):
    run_dir = tmp_path / "train"
    result = subprocess.run(
        [sys.executable, "train.py", *TINY_DATES, "trainer.max_epochs=3", "monitor.metric=val/loss",
         "monitor.mode=min", "average_checkpoints.select=best", "average_checkpoints.n=2", f"hydra.run.dir={run_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    checkpoints = run_dir / "checkpoints"
    kept = sorted((checkpoints / "average").glob("*.ckpt"))
    assert len(kept) == 2 and (checkpoints / "best.ckpt").is_file() and (checkpoints / "last.ckpt").is_file()
    assert "test on the average of 2 best checkpoints: epoch=" in result.stdout + result.stderr
    assert f"tested:          {checkpoints / AVERAGED_FILE}" in result.stdout  # beside the best checkpoint's line
    averaged = torch.load(checkpoints / AVERAGED_FILE, weights_only=False)
    assert averaged["attend"]["averaged_from"] == [path.name for path in sorted(kept, key=epoch_of)]
    states = [torch.load(path, weights_only=False)["state_dict"] for path in kept]
    for name, tensor in averaged["state_dict"].items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, (states[0][name] + states[1][name]) / 2)

    overrides = [f"ckpt_path={checkpoints / 'last.ckpt'}", "accelerator=cpu", "average_checkpoints.select=best",
                 "average_checkpoints.n=2"]
    cfg = compose_config(overrides, "eval", tmp_path / "eval")
    evaluated = evaluate(cfg)
    tested = json.loads((run_dir / "test_metrics.json").read_text())
    assert set(evaluated) == set(tested)
    assert all(math.isclose(evaluated[k], tested[k], rel_tol=1e-5, abs_tol=1e-6) for k in tested)
    assert (tmp_path / "eval" / AVERAGED_FILE).is_file()


def epoch_of(path: Path) -> int:
    return int(path.stem.split("-")[0].split("=")[1])
