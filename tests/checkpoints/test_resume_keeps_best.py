"""A run resumed into a new folder chooses, tests and averages as if it had never stopped: its best.ckpt, best score
and the checkpoints kept for averaging cover the epochs before the resume too (Lightning alone keeps only the best
path when the folder changes, and the first epoch after a resume became "best" whatever its score)."""

from __future__ import annotations

import warnings
from pathlib import Path

import lightning as L
import pytest
import torch
from torch import nn

from attend.callbacks import ResumableCheckpoint, latest_checkpoints_last
from attend.callbacks.keep_for_averaging import KeepForAveraging
from attend.checkpoints.averaging import read_kept
from attend.checkpoints.files import read_checkpoint

# three train.py runs end to end (about a minute here): the slow tier (make test-slow; CI runs both)
pytestmark = pytest.mark.slow

SCORES = [0.5, 0.3, 0.4, 0.45, 0.35]  # val/loss by epoch: the best is epoch 1, the second best epoch 4


class Scripted(L.LightningModule):
    """Trains a little; its validation loss is SCORES[epoch], whatever the weights."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", SCORES[self.current_epoch])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader():
    data = torch.utils.data.TensorDataset(torch.randn(8, 2))
    return torch.utils.data.DataLoader(data, batch_size=4)


def fit(folder: Path, epochs: int, ckpt_path: Path | None = None) -> list[L.Callback]:
    """Train ``epochs`` in ``folder`` (from ``ckpt_path``), with best.ckpt, last.ckpt and the two best kept for
    averaging, as the default callbacks keep them."""
    checkpoints = folder / "checkpoints"
    callbacks = latest_checkpoints_last([  # in the order the config lists them; last.ckpt is then written last
        ResumableCheckpoint(dirpath=checkpoints, filename="best", monitor="val/loss", mode="min", save_top_k=1,
                            enable_version_counter=False),
        ResumableCheckpoint(dirpath=checkpoints, filename="last", monitor=None, save_top_k=1,
                            enable_version_counter=False),
        KeepForAveraging(checkpoints / "average", "best", 2, "val/loss", "min"),
    ])
    trainer = L.Trainer(max_epochs=epochs, callbacks=callbacks, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", devices=1)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # Lightning's "dirpath has changed" warning would be an error
        warnings.filterwarnings("ignore", message=".*(does not have many workers|log_every_n_steps).*")
        trainer.fit(Scripted(), train_dataloaders=loader(), val_dataloaders=loader(), ckpt_path=ckpt_path)
    return callbacks


def best_epoch(folder: Path) -> int:
    return read_checkpoint(folder / "checkpoints" / "best.ckpt")["epoch"]


def averaged_epochs(folder: Path) -> list[int]:
    return sorted(kept.epoch for kept, _ in read_kept(folder / "checkpoints" / "average"))


def test_a_run_resumed_after_its_best_epoch_keeps_it(tmp_path):
    whole = fit(tmp_path / "whole", 5)
    fit(tmp_path / "first", 3)  # epochs 0-2: the best (0.3) is epoch 1; then the run stops
    resumed = fit(tmp_path / "resumed", 5, ckpt_path=tmp_path / "first" / "checkpoints" / "last.ckpt")
    assert best_epoch(tmp_path / "resumed") == best_epoch(tmp_path / "whole") == 1  # not epoch 3 (0.45)
    assert float(resumed[0].best_model_score) == float(whole[0].best_model_score) == pytest.approx(0.3)
    assert Path(resumed[0].best_model_path).parent == tmp_path / "resumed" / "checkpoints"
    assert averaged_epochs(tmp_path / "resumed") == averaged_epochs(tmp_path / "whole") == [1, 4]
    assert sorted(map(float, resumed[1].best_k_models.values())) == sorted(map(float, whole[1].best_k_models.values()))


def test_a_finished_run_resumed_still_has_its_best_and_its_averages(tmp_path):
    fit(tmp_path / "finished", 5)
    again = fit(tmp_path / "again", 5, ckpt_path=tmp_path / "finished" / "checkpoints" / "last.ckpt")
    assert best_epoch(tmp_path / "again") == 1 and float(again[0].best_model_score) == pytest.approx(0.3)
    assert averaged_epochs(tmp_path / "again") == [1, 4]  # what a test after the resume averages


def test_a_kept_checkpoint_deleted_before_the_resume_is_left_out(tmp_path, caplog):
    fit(tmp_path / "first", 3)
    (tmp_path / "first" / "checkpoints" / "best.ckpt").unlink()
    resumed = fit(tmp_path / "resumed", 4, ckpt_path=tmp_path / "first" / "checkpoints" / "last.ckpt")
    assert "is gone" in caplog.text
    # nothing left to choose from before the resume: the first epoch after it is the best so far
    assert best_epoch(tmp_path / "resumed") == 3 and float(resumed[0].best_model_score) == pytest.approx(0.45)


class FittedData:
    """A data module's tokenizer state, as ``DataModule.state_dict`` gives it."""

    def __init__(self, itos: list[str]) -> None:
        self.state = {"tgt_tokenizer": {"class": "attend.data.tokenizers.char.CharTokenizer",
                                        "settings": {"lowercase": True}, "fitted": {"itos": itos}}}

    def state_dict(self) -> dict:
        return self.state


def test_a_resume_whose_data_fits_other_tokenizers_is_refused():
    """Resuming with changed data: the data module would take the checkpoint's tokenizers and the model keep its own;
    with vocabularies of one size everything would decode with the wrong tokens. Refused in one line."""
    from attend.checkpoints.resume import check_same_tokenizers
    from attend.config.errors import ConfigError

    checkpoint = {"DataModule": FittedData(["<pad>", "a", "b"]).state_dict()}
    check_same_tokenizers(checkpoint, FittedData(["<pad>", "a", "b"]), "last.ckpt")  # the same data: resumes
    with pytest.raises(ConfigError, match="its tokenizers differ .*model.init_from"):
        check_same_tokenizers(checkpoint, FittedData(["<pad>", "b", "a"]), "last.ckpt")  # same size, other tokens


# train.py end to end: four epochs whose best (monitor.mode=max on val/loss: the first epochs) come before a
# preemption after epoch 1; the resumed run must choose, average and test as the uninterrupted one did
WHOLE_RUN = ["data=dates", "data.source.n_train=2000", "data.source.n_val=64", "data.source.n_test=64",
             "encoder.embedding_dim=16", "encoder.hidden_size=32", "decoder.embedding_dim=16",
             "decoder.hidden_size=64", "trainer.limit_train_batches=3", "trainer.limit_val_batches=1",
             "logger=csv", "callbacks.attention_plots=null", "trainer.max_epochs=4", "monitor.metric=val/loss",
             "monitor.mode=max", "average_checkpoints.select=best", "average_checkpoints.n=2"]


def train_py(folder: Path, *overrides: str) -> str:
    import subprocess
    import sys

    from tests.helpers.paths import ROOT

    result = subprocess.run([sys.executable, "train.py", *WHOLE_RUN, *overrides, f"hydra.run.dir={folder}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def run_outcome(folder: Path) -> dict:
    """What a run chose and reported: its best epoch and weights, the averaged epochs, summary.json's monitored
    best, epochs and steps, and the test metrics."""
    import json

    summary = json.loads((folder / "summary.json").read_text())
    best = read_checkpoint(folder / "checkpoints" / "best.ckpt")
    return {"best_epoch": best["epoch"], "best_weights": best["state_dict"], "averaged": averaged_epochs(folder),
            "monitored": summary["monitor"]["best"], "epochs": summary["epochs"], "steps": summary["steps"],
            "test": json.loads((folder / "test_metrics.json").read_text())}


def assert_same_outcome(got: dict, expected: dict) -> None:
    assert got["best_epoch"] == expected["best_epoch"] and got["averaged"] == expected["averaged"]
    assert got["monitored"] == pytest.approx(expected["monitored"], rel=1e-5)
    assert (got["epochs"], got["steps"]) == (expected["epochs"], expected["steps"])
    for name, tensor in expected["best_weights"].items():
        torch.testing.assert_close(got["best_weights"][name], tensor, rtol=1e-5, atol=1e-6)
    assert got["test"].keys() == expected["test"].keys()
    assert all(got["test"][k] == pytest.approx(v, rel=1e-4, abs=1e-6) for k, v in expected["test"].items())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("whole")
    train_py(folder)
    return folder


def test_train_py_preempted_after_its_best_epoch_and_resumed_equals_the_uninterrupted_run(uninterrupted, tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    output = train_py(first, "+callbacks.preempt._target_=tests.helpers.preempt_after_epoch.PreemptAfterEpoch",
                      "+callbacks.preempt.epoch=1")
    assert "SIGTERM received" in output and not (first / "test_metrics.json").exists()
    train_py(resumed, f"ckpt_path={first / 'checkpoints' / 'last.ckpt'}")
    expected = run_outcome(uninterrupted)
    assert expected["best_epoch"] <= 1  # the best came before the preemption: a resume that forgot it would differ
    assert_same_outcome(run_outcome(resumed), expected)


def test_train_py_resumed_after_its_fit_had_finished_tests_the_same(uninterrupted, tmp_path):
    train_py(tmp_path, f"ckpt_path={uninterrupted / 'checkpoints' / 'last.ckpt'}")
    assert_same_outcome(run_outcome(tmp_path), run_outcome(uninterrupted))
