"""train(cfg): instantiate -> fit -> test -> return the monitored metric (Optuna reads it)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attend.builder import build_datamodule, build_model, check_config, instantiate_all
from attend.callbacks import reference_text

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> float | None:
    check_config(cfg)
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, output_dir / "config_resolved.yaml", resolve=True)
    L.seed_everything(cfg.seed, workers=True)

    datamodule = build_datamodule(cfg)
    datamodule.prepare_data()
    datamodule.setup("fit")
    model = build_model(cfg, datamodule)
    trainer: L.Trainer = instantiate(
        cfg.trainer,
        callbacks=instantiate_all(cfg.get("callbacks")),
        logger=instantiate_all(cfg.get("logger")),
    )
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    monitored = trainer.callback_metrics.get(cfg.monitor.metric)
    checkpoint = trainer.checkpoint_callback
    if checkpoint is not None and checkpoint.best_model_score is not None:
        monitored = checkpoint.best_model_score

    test_metrics = {}
    if cfg.get("run_test"):
        best = "best" if checkpoint is not None and checkpoint.best_model_path else None
        test_metrics = trainer.test(model, datamodule=datamodule, ckpt_path=best, verbose=False)[0]
        write_results(output_dir, test_metrics, model.test_predictions)
    report(output_dir, test_metrics, checkpoint)
    return None if monitored is None else float(monitored)


def write_results(output_dir: Path, metrics: dict, predictions: list[dict]) -> None:
    """Test metrics as JSON and the decoded test set as TSV in the run folder."""
    (output_dir / "test_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    ordered = sorted(predictions, key=lambda p: p["id"])  # batches come sorted by length; restore file order
    lines = ["source\treference\thypothesis"] + [
        f"{p['source']}\t{reference_text(p['reference'])}\t{p['hypothesis']}" for p in ordered
    ]
    (output_dir / "test_predictions.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def report(output_dir: Path, test_metrics: dict, checkpoint) -> None:
    """Print where everything landed, for a person reading the terminal."""
    print("\n=== Attend run finished ===")
    for name, value in sorted(test_metrics.items()):
        print(f"{name:>14}: {value:.4f}")
    if checkpoint is not None and checkpoint.best_model_path:
        print(f"best checkpoint: {checkpoint.best_model_path}")
    print(f"run folder:      {output_dir}")
    print(f"attention plots: {output_dir / 'attention'}")
