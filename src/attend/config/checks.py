"""Start-up checks of a composed config, before any data is read: values never set, an encoder that cannot read
the data, options a class does not take, values of the wrong type. ``ConfigError`` is what they raise."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

from hydra.utils import get_class
from omegaconf import DictConfig, ListConfig, OmegaConf

from attend.config.errors import ConfigError
from attend.config.option_types import type_errors
from attend.config.renamed_options import moved_targets, renamed_options

# what model.init_parts may name: the parts model.init_from loads (all: the encoder, the decoder and the CTC head)
INIT_PARTS = ("encoder", "decoder", "all")


def check_config(cfg: DictConfig) -> None:
    """Fail at start-up, before any data is read, on mandatory values (``???``) never set, an encoder that
    cannot read the data, options a class does not take and values of the wrong type."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        keys = ", ".join(missing)
        raise ConfigError(
            f"mandatory config values are not set: {keys}; set them on the command line, e.g. {missing[0]}=..."
        )
    moved = moved_targets(cfg)
    if moved:
        raise ConfigError("classes moved: " + "; ".join(moved) + ". Use the new names")
    if "data" in cfg:
        renamed = renamed_options(cfg.data)
        if renamed:
            raise ConfigError("data options were renamed: " + "; ".join(renamed) + ". Use the new names")
    if "encoder" in cfg and "data" in cfg:
        check_modality(cfg)
    for group in ("data", "encoder", "attention", "decoder"):
        check_options(cfg, group)
    if isinstance(cfg.get("decoding"), DictConfig) and isinstance(cfg.get("model"), DictConfig):
        check_ctc_decoding(cfg)
        check_word_prior(cfg)
    if isinstance(cfg.get("model"), DictConfig):
        check_init_from(cfg)
        check_loss_weights(cfg.model)
    if cfg.get("average_checkpoints") is not None:
        check_average_checkpoints(cfg)
    check_threads(cfg.get("threads"))
    errors = type_errors(cfg)
    if errors:
        raise ConfigError("config values of the wrong type: " + "; ".join(errors))


def check_options(cfg: DictConfig, group: str) -> None:
    """Every option of a group's config, and of each ``_target_`` node inside it (``data.loader``,
    ``data.modality``), must be a parameter of its class: an option tuned for another choice (an RNN size given
    to decoder=transformer by an experiment, say) or misspelt is refused by name."""
    node = cfg.get(group)
    if isinstance(node, DictConfig):
        check_node_options(node, group)


def check_node_options(node: DictConfig, key: str) -> None:
    for name in node:
        child = node._get_node(name)
        if isinstance(child, DictConfig) and not OmegaConf.is_interpolation(node, name):
            check_node_options(child, f"{key}.{name}")
    accepted = init_parameters(get_class(node._target_)) if "_target_" in node else None
    if accepted is None:
        return
    unknown = [name for name in node if not str(name).startswith("_") and name not in accepted]
    if unknown:
        group = key.split(".")[0]
        why = (f"A task or experiment tuned for another {group} set it: choose that {group}, or an experiment made "
               "for this one, or drop" if key == group else "Check its spelling, or drop")
        raise ConfigError(f"{key} {node._target_} has no option {', '.join(unknown)}; its options are "
                          f"{', '.join(sorted(accepted))}. {why} the option with ~{key}.{unknown[0]}")


def init_parameters(cls: type) -> set[str] | None:
    """Names ``cls(...)`` accepts, following ``**kwargs`` up the base classes; None when anything goes."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(klass.__init__).parameters.values()
        names |= {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} - {"self"}
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            return names
    return None


def check_init_from(cfg: DictConfig) -> None:
    """``model.init_parts`` names parts of the model (one, or a list), and ``model.init_from`` a file that exists
    (not looked for when the run resumes: ``ckpt_path`` restores every weight then). What the file holds is read
    once the model is built (``attend.checkpoints.init_from``)."""
    parts = cfg.model.get("init_parts", "all")
    names = list(parts) if isinstance(parts, ListConfig | list) else [parts]
    unknown = [str(name) for name in names if name not in INIT_PARTS]
    if unknown or not names:
        raise ConfigError(
            f"model.init_parts names {', '.join(unknown) or 'no part'}, which the model does not have: choose from "
            f"{', '.join(INIT_PARTS)} (one, or a list: model.init_parts=[encoder,decoder])"
        )
    path = cfg.model.get("init_from")
    if path is not None and not cfg.get("ckpt_path") and not Path(str(path)).is_file():
        raise ConfigError(
            f"model.init_from={str(path)!r} does not exist: point it at a checkpoint of an earlier run, e.g. "
            f"model.init_from=outputs/<task>/runs/<time>/checkpoints/best.ckpt"
        )


def check_ctc_decoding(cfg: DictConfig) -> None:
    """``decoding.ctc_weight`` is a mixing weight in [0, 1]; the test search's (beam search reads it, greedy search
    does not) above 0 weighs the CTC scorer, which reads the CTC head that only a model trained with
    ``model.ctc_weight`` > 0 has: refused here rather than at the first test batch, after the whole training."""
    weight = cfg.decoding.get("ctc_weight", 0.0)
    if not isinstance(weight, int | float):
        return  # type_errors names it
    if not 0.0 <= weight <= 1.0:
        raise ConfigError(f"decoding.ctc_weight is a mixing weight in [0, 1], got {weight}: set "
                          "decoding.ctc_weight=0.3, say, or 0 (off)")
    decoded = OmegaConf.select(cfg, "model.test_search.ctc_weight", default=0.0)  # greedy search has no CTC weight
    trained = cfg.model.get("ctc_weight", 0.0)
    if isinstance(decoded, int | float) and decoded > 0 and isinstance(trained, int | float) and trained == 0:
        raise ConfigError(f"decoding.ctc_weight={decoded} decodes with the CTC head, but model.ctc_weight=0 trains "
                          "none: set model.ctc_weight > 0 (0.3, say), or decoding.ctc_weight=0")


def check_word_prior(cfg: DictConfig) -> None:
    """A test search with the word prior (weight > 0) reads wordfreq's list of its language and needs a character
    vocabulary: both refused here rather than at the first test batch, after the whole training."""
    weight = OmegaConf.select(cfg, "model.test_search.weights.word_prior", default=0.0)
    if not isinstance(weight, int | float) or weight == 0:
        return
    if weight < 0:
        raise ConfigError(f"decoding.word_prior_weight={weight} is below 0: set 0.3, say, or 0 (off)")
    tokenizer = str(OmegaConf.select(cfg, "data.tokenizer._target_", default=""))
    if not tokenizer.endswith("CharTokenizer"):
        raise ConfigError(f"decoding.word_prior_weight={weight} needs character outputs, and data.tokenizer is "
                          f"{tokenizer or 'not set'}: use attend.data.CharTokenizer, or decoding.word_prior_weight=0")
    language = OmegaConf.select(cfg, "model.test_search.scorers.word_prior.language", default="en")
    try:
        import wordfreq
    except ImportError:
        return  # the prior's own bind names the package to install
    if language not in wordfreq.available_languages("large"):
        raise ConfigError(f"wordfreq has no 'large' word list for language {language!r}: set "
                          "decoding.word_prior_language to one it lists, e.g. en or fr")


# model options with a valid range: lowest, highest, whether each end is allowed, and an example to set
LOSS_RANGES = {
    "guided_attention": (0.0, math.inf, True, False, "1.0, or 0 (off)"),
    "guided_attention_sigma": (0.0, math.inf, False, False, "0.25"),
    "ctc_weight": (0.0, 1.0, True, True, "0.3, or 0 (off)"),
    "label_smoothing": (0.0, 1.0, True, False, "0.1, or 0 (off)"),
}


def check_loss_weights(model: DictConfig) -> None:
    """The loss terms' weights and widths in their ranges: a negative guided attention weight would reward attention
    off the diagonal, a width of 0 gives NaN losses, label smoothing of 1 learns nothing."""
    for key, (low, high, with_low, with_high, example) in LOSS_RANGES.items():
        value = model.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue  # absent, or type_errors names it
        if low < value < high or (value == low and with_low) or (value == high and with_high):
            continue
        upper = "∞)" if high == math.inf else f"{high:g}{']' if with_high else ')'}"
        bounds = f"{'[' if with_low else '('}{low:g}, {upper}"
        raise ConfigError(f"model.{key} must be in {bounds}, got {value}: set model.{key}={example}")


def check_modality(cfg: DictConfig) -> None:
    """The encoder must read what the data gives (``modality`` of both classes: text, image, audio)."""
    plugin = cfg.data.get("modality")
    data = getattr(get_class(plugin._target_), "name", None) if isinstance(plugin, DictConfig) else None
    encoder = getattr(get_class(cfg.encoder._target_), "modality", None)
    if data and encoder and data != encoder:
        raise ConfigError(
            f"encoder {cfg.encoder._target_} reads {encoder} but the data ({cfg.data._target_}) gives {data}: "
            f"choose an {data} encoder (text: encoder=rnn; image: encoder=cnn, encoder=resnet or "
            f"encoder=efficientnet; audio: encoder=audio), or the task that goes with this data (task=mt for "
            f"text, task=caption for images, task=asr for audio)"
        )


AVERAGE_SELECTS = ("best", "last")  # what average_checkpoints.select may be (null: off)


def check_threads(threads) -> None:
    """``threads``: auto (measured while training), null (PyTorch's default) or a whole number, 1 or more."""
    if threads is None or threads == "auto":
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"threads must be auto, null or a whole number of CPU threads, 1 or more, not {threads!r}: "
                          "set threads=auto (measure which count trains fastest), threads=1, or threads=null for "
                          "PyTorch's default (one per core)")


def check_average_checkpoints(cfg: DictConfig) -> None:
    """``average_checkpoints`` (attend.checkpoints.averaging): ``select`` best, last or null (off), ``n`` a whole
    number of checkpoints; a training run must write checkpoints to keep them."""
    node = cfg.average_checkpoints
    select, n = node.get("select"), node.get("n")
    if select is None:
        return
    if select not in AVERAGE_SELECTS:
        raise ConfigError(f"average_checkpoints.select must be best or last (null: off), not {select!r}: set "
                          "average_checkpoints.select=best (the N best by monitor.metric) or =last (the last N epochs)")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"average_checkpoints.n must be a whole number of checkpoints, 1 or more, not {n!r}: set "
                          "average_checkpoints.n=5")
    trainer = cfg.get("trainer")
    if isinstance(trainer, DictConfig) and trainer.get("enable_checkpointing") is False:
        raise ConfigError("average_checkpoints needs checkpoints, but trainer.enable_checkpointing=false (debug=fast "
                          "and debug=overfit write none): drop debug=..., or set average_checkpoints.select=null")
