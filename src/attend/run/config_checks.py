"""Start-up checks of a composed config, before any data is read: values never set, an encoder that cannot read
the data, options a class does not take, values of the wrong type. ``ConfigError`` is what they raise."""

from __future__ import annotations

import inspect

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from attend.data.options import renamed_options
from attend.run.config_types import type_errors


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the key and the fix."""


def check_config(cfg: DictConfig) -> None:
    """Fail at start-up, before any data is read, on mandatory values (``???``) never set, an encoder that
    cannot read the data, options a class does not take and values of the wrong type."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        keys = ", ".join(missing)
        raise ConfigError(
            f"mandatory config values are not set: {keys}; set them on the command line, e.g. {missing[0]}=..."
        )
    if "data" in cfg:
        renamed = renamed_options(cfg.data)
        if renamed:
            raise ConfigError("data options were renamed: " + "; ".join(renamed) + ". Use the new names")
    if "encoder" in cfg and "data" in cfg:
        check_modality(cfg)
    for group in ("data", "encoder", "attention", "decoder"):
        check_options(cfg, group)
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
