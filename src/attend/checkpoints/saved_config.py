"""A saved run's config as this command uses it: the one place that rewrites a checkpoint's config
(``run_config``). In this order: the config an older Attend saved is upgraded to today's form (renamed data
options, moved classes: ``attend.config.renamed_options``); eval.py's and predict.py's search options replace the
saved search's (``search_overrides``); eval.py's ``paths.cache_dir`` moves where the data is prepared
(``with_cache_dir``); eval.py's ``data=<name>`` gives the test data (``with_test_data``); and once that data is
set up, the metrics its batches cannot feed are left out (``evaluation_datamodule``).

The data eval.py tests a checkpoint on: its own test split, or with ``data=<name>`` another data config's, read
the way the checkpoint's run read its own, so that a model is scored out of domain.

With ``data=<name>`` the checkpoint's saved data config is kept and these parts of it are replaced:

- from the data config given (with the command line's ``data.*`` overrides): ``source`` (the corpus and its splits),
  the ``loader`` keys it sets (over the checkpoint's: ``eval_batch_size``, ``num_workers``), ``on_error`` and
  ``max_skip_fraction`` where it sets them, and the metrics a ``_global_`` data config adds (``model.metrics``);
- from the checkpoint, everything else: the ``modality`` plug-in and its features (the source tokenizer's kind, the
  image size, the audio front end and SpecAugment that task=asr set), the fitted tokenizers (a character or word
  they never saw is unk), ``seed`` and the training-only length limits. The data config's interpolations
  (``${seed}``, ``${paths.cache_dir}``) resolve against the checkpoint's config: its seed, the cache dir in use.

A metric that reads a field a data set adds to its batches (its class's ``batch_fields``: alignments, objects,
object masks, unseen flags) is left out, in a log line, when the new test split's batches lack the field. A data
config of another modality (text, image, audio) than the checkpoint's is refused in one line.

The data is prepared under eval.py's ``paths.cache_dir`` when the command line gives one, else where the
checkpoint's run prepared it (its saved ``paths.cache_dir``): every saved value under that folder moves with it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from attend.builder import build_datamodule
from attend.config.checks import check_config
from attend.config.errors import ConfigError
from attend.config.renamed_options import upgrade_config

if TYPE_CHECKING:
    from attend.checkpoints.saved_run import SavedRun

log = logging.getLogger(__name__)

# the groups check_config checks: a view of the data config given holds only data and model.metrics of them
CHECKED_GROUPS = ("data", "encoder", "attention", "decoder", "model", "optim", "trainer", "decoding",
                  "average_checkpoints")
FROM_GIVEN = ("on_error", "max_skip_fraction")  # data options taken from the data config given, where it sets them
# eval.py's and predict.py's search options, decoding.<name> as train.py's, and the smallest value each takes
# (ctc_weight is at most 1 too); given at the top level (beam_size=5, their spelling before) they are refused
SEARCH_OPTIONS = {"beam_size": 1, "length_penalty": 0.0, "min_len_ratio": 0.0, "max_len_a": 0.0, "max_len_b": 0,
                  "ctc_weight": 0.0}
# the numbers eval.py and predict.py check, those options and the word prior's weight (a new option: no old spelling)
NUMBER_OPTIONS = {**SEARCH_OPTIONS, "word_prior_weight": 0.0}
BEAM_ONLY = ("beam_size", "length_penalty", "min_len_ratio", "ctc_weight")  # options GreedySearch does not take


def run_config(checkpoint: dict, cfg: DictConfig | None = None) -> DictConfig:
    """The run config ``checkpoint`` saved, in today's form; with ``cfg`` (eval.py's or predict.py's config), its
    search options, cache folder and test data applied (see the module docstring)."""
    saved = checkpoint["attend"]["config"]
    config = upgrade_config(OmegaConf.create(saved))
    if cfg is None:
        return config
    for key, value in search_overrides(cfg, saved).items():
        OmegaConf.update(config, key, value, force_add=True)
    config = with_cache_dir(config, OmegaConf.select(cfg, "paths.cache_dir"))
    return with_test_data(config, cfg)


def search_overrides(cfg: DictConfig, saved: dict | None = None) -> dict:
    """Dotted keys of the saved config that this evaluation changes (the test search's settings, given as
    ``decoding.<name>``; null keeps the checkpoint's own), checked at start-up against the checkpoint's saved config
    ``saved``: an old spelling, a value out of range, a beam-search option on a greedy search, or joint CTC decoding
    of a model without a CTC head is a ConfigError naming the fix."""
    old = [f"{key}={cfg[key]} is now decoding.{key}={cfg[key]}" for key in SEARCH_OPTIONS if cfg.get(key) is not None]
    if old:
        raise ConfigError("the search options are spelt decoding.<name>, as train.py's: " + "; ".join(old))
    decoding = cfg.get("decoding") or {}
    given = {key: decoding[key] for key in NUMBER_OPTIONS if decoding.get(key) is not None}
    for key, value in given.items():
        lowest = NUMBER_OPTIONS[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < lowest or (
                key == "ctc_weight" and value > 1):
            raise ConfigError(f"decoding.{key}={value!r} is out of range: give a number of at least {lowest:g}"
                              + (" and at most 1" if key == "ctc_weight" else "") + f", or drop decoding.{key}")
    if saved is not None:
        check_search_against_model(given, saved)
    overrides = {f"model.test_search.{key}": value for key, value in given.items() if key in SEARCH_OPTIONS}
    overrides.update(word_prior_overrides(given.get("word_prior_weight"), decoding.get("word_prior_language"), saved,
                                          beam="beam_size" in given))
    if "beam_size" in given:
        overrides["model.test_search._target_"] = "attend.search.BeamSearch"
    return overrides


def word_prior_overrides(weight: float | None, language: str | None, saved: dict | None, beam: bool) -> dict:
    """The word prior's scorer and weight (``decoding.word_prior_weight``, checked by ``search_overrides``, and
    ``decoding.word_prior_language``; null keeps the checkpoint's own) as test-search keys: both the scorer and its
    weight, since a checkpoint saved before the prior has neither. Beam search only."""
    if weight is None and language is None:
        return {}
    search = ((saved or {}).get("model") or {}).get("test_search") or {}
    if saved is not None and not beam and search.get("_target_") != "attend.search.BeamSearch":
        raise ConfigError("decoding.word_prior_weight applies to beam search, and this checkpoint tests with greedy "
                          "search: add decoding.beam_size=5 (say) to search with a beam")
    saved_prior = (search.get("scorers") or {}).get("word_prior") or {}
    saved_weight = (search.get("weights") or {}).get("word_prior", 0.0)
    return {
        "model.test_search.scorers.word_prior": {"_target_": "attend.search.WordPrior",
                                                 "language": language or saved_prior.get("language", "en")},
        "model.test_search.weights.word_prior": saved_weight if weight is None else float(weight),
    }


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


def with_cache_dir(config: DictConfig, cache_dir: str | None) -> DictConfig:
    """``config`` preparing its data under ``cache_dir`` (eval.py's ``paths.cache_dir``); unchanged when None."""
    if not cache_dir:
        return config
    saved = OmegaConf.select(config, "paths.cache_dir") or OmegaConf.select(config, "data.cache_dir")
    container: Any = OmegaConf.to_container(config, resolve=False)
    if saved:
        container = moved(container, str(saved), str(cache_dir))
    container.setdefault("paths", {})["cache_dir"] = str(cache_dir)
    container["data"]["cache_dir"] = str(cache_dir)
    return OmegaConf.create(container)


def moved(value: Any, old: str, new: str) -> Any:
    """``value`` with every string that is the folder ``old`` or a path under it moved to ``new``."""
    if isinstance(value, dict):
        return {key: moved(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [moved(item, old, new) for item in value]
    if not isinstance(value, str):
        return value
    old, new = old.rstrip("/") or "/", new.rstrip("/") or "/"
    if value.rstrip("/") == old:
        return new
    return new + value[len(old):] if value.startswith(old + "/") else value


def data_name(cfg: DictConfig) -> str:
    """``data=<choice>`` as eval.py was given it (outside a Hydra run: the data config's source class)."""
    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("data")
        if choice:
            return f"data={choice}"
    return f"the data config ({OmegaConf.select(cfg, 'data.source._target_', default='?')})"


def modality_of(data: DictConfig | dict) -> str | None:
    """What a data config gives the encoder: its modality plug-in's ``name`` (text, image, audio)."""
    plugin = data.get("modality")
    target = plugin.get("_target_") if isinstance(plugin, (dict, DictConfig)) else None
    return getattr(get_class(target), "name", None) if target else None


def with_test_data(config: DictConfig, cfg: DictConfig) -> DictConfig:
    """The checkpoint's ``config`` with the test data of eval.py's ``data`` (see the module docstring); ``config``
    unchanged when eval.py was given no data config."""
    if cfg.get("data") is None:
        return config
    name = data_name(cfg)
    given: Any = OmegaConf.to_container(cfg.data, resolve=False)
    metrics: Any = OmegaConf.to_container(cfg.model.metrics, resolve=False) if OmegaConf.select(
        cfg, "model.metrics") is not None else {}
    if not isinstance(given.get("source"), dict):
        raise ConfigError(f"{name} names no data.source: choose a data config from conf/data/ (data=dates, ...)")
    check_config(view(config, given, metrics))  # its ??? values, options and types, interpolations resolved
    trained, testing = modality_of(config.data), modality_of(given)
    if trained != testing:
        raise ConfigError(
            f"{name} gives {testing} but the checkpoint's model reads {trained} (it was trained on "
            f"{OmegaConf.select(config, 'data.source._target_')}): evaluate it on a data config that gives {trained}"
        )
    merged: Any = OmegaConf.to_container(config, resolve=False)
    data = merged["data"]
    data["source"] = given["source"]
    data["loader"] = {**(data.get("loader") or {}), **(given.get("loader") or {})}
    data.update({key: given[key] for key in FROM_GIVEN if key in given})
    merged.setdefault("model", {})["metrics"] = {**(merged["model"].get("metrics") or {}), **metrics}
    log.info("testing on the test split of %s (%s), read as the checkpoint's run read its own",
             name, given["source"].get("_target_"))
    return OmegaConf.create(merged)


def view(config: DictConfig, data: dict, metrics: dict) -> DictConfig:
    """What check_config reads of the data config given: it and its metrics, beside the checkpoint's other top-level
    keys (seed, paths) that its interpolations name."""
    saved: Any = OmegaConf.to_container(config, resolve=False)
    others = {key: value for key, value in saved.items() if key not in CHECKED_GROUPS}
    return OmegaConf.create({**others, "data": data, "model": {"metrics": metrics}})


def leave_out_unfed_metrics(config: DictConfig, batch: dict, name: str) -> None:
    """Drop from ``config.model.metrics`` each metric whose ``batch_fields`` the test batches of ``name`` lack."""
    metrics = config.model.get("metrics") or {}
    for metric in list(metrics):
        node = metrics[metric]
        if node is None:
            continue
        lacking = [field for field in getattr(get_class(node._target_), "batch_fields", ()) if field not in batch]
        if lacking:
            log.info("metric %s left out: the test batches of %s carry no %s", metric, name, ", ".join(lacking))
            del config.model.metrics[metric]


def evaluation_datamodule(run: SavedRun, cfg: DictConfig) -> L.LightningDataModule:
    """The data module the run's config describes, with its tokenizers; for another data config it is set up here,
    and the metrics its batches cannot feed are left out of ``run.config`` before the model is built."""
    config = run.config
    datamodule = build_datamodule(config, tokenizer_states=run.tokenizers)
    if cfg.get("data") is None:
        return datamodule
    datamodule.only_splits("test")  # its training and validation examples are never encoded
    datamodule.setup("test")
    name = data_name(cfg)
    if not len(datamodule.datasets["test"]):
        raise ConfigError(f"the test split of {name} holds no examples: check its data.source settings")
    leave_out_unfed_metrics(config, datamodule.example_batch(1, split="test"), name)
    return datamodule
