"""evaluate(cfg): test metrics of a checkpoint (or of the average of several: attend.checkpoints.averaging), on its
own test split or another data config's (attend.checkpoints.saved_config), saved as JSON, with its attention plots."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attend.builder import extraction_device
from attend.callbacks import AttentionPlots
from attend.callbacks.run_summary import write_results
from attend.checkpoints.averaging import AverageOptions, evaluated_run
from attend.checkpoints.saved_config import evaluation_datamodule
from attend.checkpoints.saved_run import restored_model
from attend.config.checks import check_config


def tested_precision(cfg: DictConfig, config: DictConfig) -> str:
    """The precision the run tested its checkpoint in (``bf16-mixed`` on the GPU trainers), so that eval.py's
    metrics are train.py's; a ``precision`` given to eval.py wins."""
    return str(cfg.get("precision") or OmegaConf.select(config, "trainer.precision", default=None) or "32-true")


def evaluate(cfg: DictConfig) -> dict:
    # eval.py's own options; a data config given is checked against the checkpoint's config (its ${seed} is that run's)
    check_config(OmegaConf.masked_copy(cfg, [key for key in cfg if key not in ("data", "model")]))
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    run = evaluated_run(cfg.ckpt_path, cfg, AverageOptions.of(cfg.get("average_checkpoints")), output_dir)
    datamodule = evaluation_datamodule(run, cfg)
    config = run.config
    model = restored_model(run, datamodule, extraction_device(cfg.accelerator))
    trainer = L.Trainer(
        accelerator=cfg.accelerator,
        devices=1,
        precision=tested_precision(cfg, config),
        logger=False,
        enable_checkpointing=False,
        default_root_dir=output_dir,
    )
    metrics = trainer.test(model, datamodule=datamodule, verbose=False)[0]
    metrics = {key: float(value) for key, value in metrics.items()}
    write_results(output_dir, metrics, model.test_predictions)
    print(json.dumps(metrics, indent=2))
    print(f"metrics:         {output_dir / 'test_metrics.json'}")
    plots = AttentionPlots(
        plot=instantiate(config.callbacks.attention_plots.plot),
        output_dir=str(output_dir),
        num_examples=cfg.num_plots,
    )
    folder = plots.draw(trainer, model, "test", split="test")
    if folder is not None:
        print(f"attention plots: {folder}")
    return metrics
