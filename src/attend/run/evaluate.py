"""evaluate(cfg): test metrics of a checkpoint (or of the average of several: attend.run.averaging), on its own test
split or another data config's (attend.run.eval_data), saved as JSON, with its attention plots."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attend.callbacks import AttentionPlots
from attend.run.averaging import AverageOptions, evaluated_checkpoint
from attend.run.checkpoint import restored_model, saved_config
from attend.run.config_checks import check_config
from attend.run.eval_data import evaluation_datamodule, with_cache_dir, with_test_data
from attend.run.summary import write_results


def search_overrides(cfg: DictConfig) -> dict:
    """Dotted keys of the saved config that this evaluation changes (search settings)."""
    overrides = {}
    for key in ("beam_size", "length_penalty", "min_len_ratio", "max_len_a", "max_len_b", "ctc_weight"):
        if cfg.get(key) is not None:
            overrides[f"model.test_search.{key}"] = cfg[key]
    if cfg.get("beam_size") is not None:
        overrides["model.test_search._target_"] = "attend.search.BeamSearch"
    return overrides


def tested_precision(cfg: DictConfig, config: DictConfig) -> str:
    """The precision the run tested its checkpoint in (``bf16-mixed`` on the GPU trainers), so that eval.py's
    metrics are train.py's; a ``precision`` given to eval.py wins."""
    return str(cfg.get("precision") or OmegaConf.select(config, "trainer.precision", default=None) or "32-true")


def evaluate(cfg: DictConfig) -> dict:
    # eval.py's own options; a data config given is checked against the checkpoint's config (its ${seed} is that run's)
    check_config(OmegaConf.masked_copy(cfg, [key for key in cfg if key not in ("data", "model")]))
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = evaluated_checkpoint(cfg.ckpt_path, AverageOptions.of(cfg.get("average_checkpoints")), output_dir)
    config = with_cache_dir(saved_config(checkpoint, search_overrides(cfg)), cfg.paths.get("cache_dir"))
    config = with_test_data(config, cfg)
    datamodule = evaluation_datamodule(config, checkpoint, cfg)
    model = restored_model(config, datamodule, checkpoint)
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
