"""train(cfg): instantiate -> fit -> test -> return the monitored metric (Optuna reads it)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
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
    started = time.perf_counter()
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    fit_seconds = time.perf_counter() - started
    # read before testing: trainer.test replaces the callback metrics with the test ones
    val_metrics = {k: float(v) for k, v in sorted(trainer.callback_metrics.items()) if k.startswith("val/")}
    monitored = trainer.callback_metrics.get(cfg.monitor.metric)
    checkpoint = trainer.checkpoint_callback
    if checkpoint is not None and checkpoint.best_model_score is not None:
        monitored = checkpoint.best_model_score

    test_metrics = {}
    if cfg.get("run_test"):
        best = "best" if checkpoint is not None and checkpoint.best_model_path else None
        test_metrics = trainer.test(model, datamodule=datamodule, ckpt_path=best, verbose=False)[0]
        write_results(output_dir, test_metrics, model.test_predictions)
    monitored = None if monitored is None else float(monitored)
    write_summary(output_dir, trainer, model, fit_seconds, cfg.monitor.metric, monitored, val_metrics, test_metrics)
    report(output_dir, test_metrics, checkpoint)
    return monitored


def write_summary(
    output_dir: Path, trainer: L.Trainer, model: L.LightningModule, fit_seconds: float, monitor: str,
    monitored: float | None, val_metrics: dict, test_metrics: dict,
) -> None:
    """``summary.json``: what comparisons of runs read (training time, steps, size, the last validation
    metrics, the best monitored value and the test metrics)."""
    summary = {
        "choices": config_choices(),
        "fit_seconds": round(fit_seconds, 1),
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


def config_choices() -> dict[str, str]:
    """The option picked in each config group (task, data, encoder, attention, decoder, ...), when run by Hydra."""
    if not HydraConfig.initialized():
        return {}
    choices = HydraConfig.get().runtime.choices
    # the groups a user picks; not Hydra's own, not the task tuning that follows them, not the unset ones
    return {
        group: str(option) for group, option in choices.items()
        if option is not None and not group.startswith(("hydra", "task_tuning"))
    }


def report(output_dir: Path, test_metrics: dict, checkpoint) -> None:
    """Print where everything landed, for a person reading the terminal."""
    print("\n=== Attend run finished ===")
    for name, value in sorted(test_metrics.items()):
        print(f"{name:>14}: {value:.4f}")
    if checkpoint is not None and checkpoint.best_model_path:
        print(f"best checkpoint: {checkpoint.best_model_path}")
    print(f"run folder:      {output_dir}")
    print(f"attention plots: {output_dir / 'attention'}")
