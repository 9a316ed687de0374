"""The files a run leaves in its folder: ``summary.json`` (what comparisons of runs read), ``test_metrics.json``
and ``test_predictions.tsv``, written by the RunSummary callback after training and by eval.py (``write_results``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import lightning as L
from lightning.fabric.utilities.apply_func import convert_tensors_to_scalars

from attend.callbacks import reference_text
from attend.callbacks.preemption import Preemption
from attend.config.hydra_choices import command_line_overrides, config_choices


class RunSummary(L.Callback):
    """Writes the run's files into ``output_dir`` (global rank 0) once the run is done, after the test when
    ``tested`` (else after the fit): ``summary.json``, and with test metrics ``test_metrics.json`` and
    ``test_predictions.tsv``; then prints where everything landed. After the fit it holds ``monitored``, the best
    value of the metric ``monitor`` (the best checkpoint's score, else its last value), and ``interrupted``: a
    preemption stopped the fit (its checkpoint is saved), so nothing is written and no test should follow.
    ``device_slot``: the slot of a parallel sweep job, recorded in summary.json."""

    def __init__(self, output_dir: str | Path, monitor: str, tested: bool, device_slot: int | None = None) -> None:
        self.output_dir = Path(output_dir)
        self.monitor = monitor
        self.tested = tested
        self.device_slot = device_slot
        self.started_at: float | None = None
        self.started: float | None = None
        self.fit_seconds: float | None = None
        self.val_metrics: dict[str, float] = {}
        self.monitored: float | None = None
        self.interrupted = False
        self.test_metrics: dict | None = None

    def start_clock(self) -> None:
        """Call right before ``trainer.fit``: fit_seconds then counts the start of the other DDP ranks too."""
        self.started_at, self.started = time.time(), time.perf_counter()

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # what trainer.test returns for its one data loader: the metrics logged in the test, as numbers
        self.test_metrics = convert_tensors_to_scalars(dict(trainer.logged_metrics))

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit":
            self.fit_ended(trainer)
            if not self.tested and not self.interrupted:
                self.write(trainer, pl_module, {})
        elif stage == "test" and self.tested and not self.interrupted and self.test_metrics is not None:
            self.write(trainer, pl_module, self.test_metrics)

    def fit_ended(self, trainer: L.Trainer) -> None:
        """The fit's time, last validation metrics and best monitored value (a test replaces the callback metrics)."""
        if self.started is not None:
            self.fit_seconds = time.perf_counter() - self.started
        self.interrupted = any(isinstance(c, Preemption) and c.saved is not None for c in trainer.callbacks)
        self.val_metrics = {k: float(v) for k, v in sorted(trainer.callback_metrics.items()) if k.startswith("val/")}
        monitored = trainer.callback_metrics.get(self.monitor)
        checkpoint = trainer.checkpoint_callback
        if checkpoint is not None and checkpoint.best_model_score is not None:
            monitored = checkpoint.best_model_score
        self.monitored = None if monitored is None else float(monitored)

    def write(self, trainer: L.Trainer, pl_module: L.LightningModule, test_metrics: dict) -> None:
        if not trainer.is_global_zero:
            return
        if test_metrics:
            write_results(self.output_dir, test_metrics, pl_module.test_predictions)
        timing = {
            "started_at": self.started_at, "finished_at": time.time(),
            "fit_seconds": None if self.fit_seconds is None else round(self.fit_seconds, 1),
            "device_slot": self.device_slot,
        }
        write_summary(
            self.output_dir, trainer, pl_module, timing, self.monitor, self.monitored, self.val_metrics, test_metrics
        )
        report(self.output_dir, test_metrics, trainer.checkpoint_callback, trainer.ckpt_path if test_metrics else None)


def write_summary(
    output_dir: Path, trainer: L.Trainer, model: L.LightningModule, timing: dict, monitor: str,
    monitored: float | None, val_metrics: dict, test_metrics: dict,
) -> None:
    """``summary.json``: what comparisons of runs read (training time, steps, size, the last validation
    metrics, the best monitored value and the test metrics). ``timing``: fit_seconds, started_at and
    finished_at (Unix time), device_slot (of a parallel sweep job)."""
    summary = {
        "choices": config_choices(),
        "overrides": command_line_overrides(),
        **timing,
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "parameters": sum(p.numel() for p in model.parameters()),
        "monitor": {"metric": monitor, "best": monitored},
        "val": val_metrics,
        "test": test_metrics,
    }
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def write_results(output_dir: Path, metrics: dict, predictions: list[dict]) -> None:
    """Test metrics as JSON and the decoded test set as TSV in the run folder."""
    (output_dir / "test_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    ordered = sorted(predictions, key=lambda p: p["id"])  # batches come sorted by length; restore file order
    lines = ["source\treference\thypothesis"] + [
        f"{p['source']}\t{reference_text(p['reference'])}\t{p['hypothesis']}" for p in ordered
    ]
    (output_dir / "test_predictions.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def report(output_dir: Path, test_metrics: dict, checkpoint, tested: str | None = None) -> None:
    """Print where everything landed, for a person reading the terminal; ``tested``: the checkpoint the test
    loaded, named when it is not the best one (the average of several: average_checkpoints)."""
    print("\n=== Attend run finished ===")
    for name, value in sorted(test_metrics.items()):
        print(f"{name:>14}: {value:.4f}")
    if checkpoint is not None and checkpoint.best_model_path:
        print(f"best checkpoint: {checkpoint.best_model_path}")
    if tested and (checkpoint is None or tested != checkpoint.best_model_path):
        print(f"tested:          {tested}")
    print(f"run folder:      {output_dir}")
    print(f"attention plots: {output_dir / 'attention'}")
