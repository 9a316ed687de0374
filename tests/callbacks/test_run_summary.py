"""The RunSummary callback writes the run's files: summary.json after the test (or after the fit when no test
follows), the test metrics and the test predictions."""

from __future__ import annotations

import json

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from attend.callbacks.run_summary import RunSummary


class Tiny(L.LightningModule):
    """One linear layer that logs val/loss and two test metrics and keeps test predictions like Seq2Seq."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.test_predictions: list[dict] = []

    def loss(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x).squeeze(-1), y)

    def training_step(self, batch, batch_idx):
        return self.loss(batch)

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self.loss(batch))

    def test_step(self, batch, batch_idx):
        self.log("test/loss", self.loss(batch))
        self.log("test/exact", 50.0)
        for i in range(len(batch[0])):
            index = batch_idx * 4 + i
            self.test_predictions.append({"id": index, "source": f"s{index}", "reference": f"r{index}",
                                          "hypothesis": f"h{index}"})

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader():
    generator = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(8, 2, generator=generator), torch.randn(8, generator=generator)),
                      batch_size=4)


def tiny_trainer(tmp_path, summary):
    return L.Trainer(
        max_epochs=2, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=tmp_path, callbacks=[
            L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "checkpoints", filename="best",
                                                monitor="val/loss"), summary,
        ],
    )


def test_run_summary_writes_the_summary_and_the_test_files_after_the_test(tmp_path, capsys):
    summary = RunSummary(tmp_path, "val/loss", tested=True, device_slot=1)
    trainer, model = tiny_trainer(tmp_path, summary), Tiny()
    summary.start_clock()
    trainer.fit(model, train_dataloaders=loader(), val_dataloaders=loader())
    assert not (tmp_path / "summary.json").exists()  # a test follows
    assert summary.monitored == float(trainer.checkpoint_callback.best_model_score) and not summary.interrupted
    returned = trainer.test(model, dataloaders=loader(), ckpt_path="best", verbose=False)[0]

    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["test"] == returned and json.loads((tmp_path / "test_metrics.json").read_text()) == returned
    assert list(written["test"]) == list(returned)  # same keys in the same order as trainer.test gives them
    assert written["monitor"] == {"metric": "val/loss", "best": summary.monitored}
    assert list(written["val"]) == ["val/loss"] and written["epochs"] == 2 and written["steps"] == 4
    assert written["device_slot"] == 1 and written["fit_seconds"] >= 0 and written["parameters"] == 3
    rows = (tmp_path / "test_predictions.tsv").read_text(encoding="utf-8").splitlines()
    assert rows == ["source\treference\thypothesis"] + [f"s{i}\tr{i}\th{i}" for i in range(8)]
    assert "=== Attend run finished ===" in capsys.readouterr().out


def test_run_summary_without_a_test_writes_the_summary_after_the_fit(tmp_path):
    summary = RunSummary(tmp_path, "val/loss", tested=False)
    trainer = tiny_trainer(tmp_path, summary)
    summary.start_clock()
    trainer.fit(Tiny(), train_dataloaders=loader(), val_dataloaders=loader())
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["test"] == {} and written["monitor"]["best"] == summary.monitored
    assert not (tmp_path / "test_metrics.json").exists() and not (tmp_path / "test_predictions.tsv").exists()
