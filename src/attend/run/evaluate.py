"""evaluate(cfg): test metrics of a checkpoint (or of the average of several: attend.run.averaging), on its own test
split or another data config's (attend.run.eval_data), saved as JSON, with its attention plots."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attend.builder import extraction_device
from attend.callbacks import AttentionPlots
from attend.run.averaging import AverageOptions, evaluated_checkpoint
from attend.run.checkpoint import restored_model, saved_config
from attend.run.config_checks import ConfigError, check_config
from attend.run.eval_data import evaluation_datamodule, with_cache_dir, with_test_data
from attend.run.summary import write_results

# eval.py's and predict.py's search options, decoding.<name> as train.py's, and the smallest value each takes
# (ctc_weight is at most 1 too); given at the top level (beam_size=5, their spelling before) they are refused
SEARCH_OPTIONS = {"beam_size": 1, "length_penalty": 0.0, "min_len_ratio": 0.0, "max_len_a": 0.0, "max_len_b": 0,
                  "ctc_weight": 0.0}
BEAM_ONLY = ("beam_size", "length_penalty", "min_len_ratio", "ctc_weight")  # options GreedySearch does not take


def search_overrides(cfg: DictConfig, saved: dict | None = None) -> dict:
    """Dotted keys of the saved config that this evaluation changes (the test search's settings, given as
    ``decoding.<name>``; null keeps the checkpoint's own), checked at start-up against the checkpoint's saved config
    ``saved``: an old spelling, a value out of range, a beam-search option on a greedy search, or joint CTC decoding
    of a model without a CTC head is a ConfigError naming the fix."""
    old = [f"{key}={cfg[key]} is now decoding.{key}={cfg[key]}" for key in SEARCH_OPTIONS if cfg.get(key) is not None]
    if old:
        raise ConfigError("the search options are spelt decoding.<name>, as train.py's: " + "; ".join(old))
    decoding = cfg.get("decoding") or {}
    given = {key: decoding[key] for key in SEARCH_OPTIONS if decoding.get(key) is not None}
    for key, value in given.items():
        lowest = SEARCH_OPTIONS[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < lowest or (
                key == "ctc_weight" and value > 1):
            raise ConfigError(f"decoding.{key}={value!r} is out of range: give a number of at least {lowest:g}"
                              + (" and at most 1" if key == "ctc_weight" else "") + f", or drop decoding.{key}")
    if saved is not None:
        check_search_against_model(given, saved)
    overrides = {f"model.test_search.{key}": value for key, value in given.items()}
    if "beam_size" in given:
        overrides["model.test_search._target_"] = "attend.search.BeamSearch"
    return overrides


def check_search_against_model(given: dict, saved: dict) -> None:
    """The options given (``decoding.<name>``: value) fit the checkpoint's search and model (``saved``, its run
    config)."""
    model = saved.get("model", {})
    beam = "beam_size" in given or model.get("test_search", {}).get("_target_") == "attend.search.BeamSearch"
    greedy_only = [f"decoding.{key}" for key in BEAM_ONLY if key in given] if not beam else []
    if greedy_only:
        raise ConfigError(f"{', '.join(greedy_only)} apply to beam search, and this checkpoint tests with greedy "
                          "search: add decoding.beam_size=5 (say) to search with a beam")
    if given.get("ctc_weight", 0) > 0 and not model.get("ctc_weight"):
        raise ConfigError(f"decoding.ctc_weight={given['ctc_weight']} decodes with a CTC head, and this checkpoint's "
                          "model has none (trained with model.ctc_weight=0): drop decoding.ctc_weight, or set it to 0")


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
    overrides = search_overrides(cfg, checkpoint["attend"]["config"])
    config = with_cache_dir(saved_config(checkpoint, overrides), cfg.paths.get("cache_dir"))
    config = with_test_data(config, cfg)
    datamodule = evaluation_datamodule(config, checkpoint, cfg)
    model = restored_model(config, datamodule, checkpoint, extraction_device(cfg.accelerator))
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
