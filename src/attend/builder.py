"""Wiring: data module, encoder, attention, decoder and LightningModule from one config."""

from __future__ import annotations

import inspect

import lightning as L
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from attend.model import Seq2Seq
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
    if "encoder" in cfg and "data" in cfg:
        check_modality(cfg)
    for group in ("encoder", "attention", "decoder"):
        check_options(cfg, group)
    errors = type_errors(cfg)
    if errors:
        raise ConfigError("config values of the wrong type: " + "; ".join(errors))


def check_options(cfg: DictConfig, group: str) -> None:
    """Every option of a group's config must be a parameter of its class: an option tuned for another
    choice (an RNN size given to decoder=transformer by an experiment, say) is refused by name."""
    node = cfg.get(group)
    if not node or "_target_" not in node:
        return
    accepted = init_parameters(get_class(node._target_))
    if accepted is None:
        return
    unknown = [key for key in node if not str(key).startswith("_") and key not in accepted]
    if unknown:
        raise ConfigError(
            f"{group} {node._target_} has no option {', '.join(unknown)}; its options are "
            f"{', '.join(sorted(accepted))}. A task or experiment tuned for another {group} set it: choose that "
            f"{group}, or an experiment made for this one, or drop the option with ~{group}.{unknown[0]}"
        )


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
    data = getattr(get_class(cfg.data._target_), "modality", None)
    encoder = getattr(get_class(cfg.encoder._target_), "modality", None)
    if data and encoder and data != encoder:
        raise ConfigError(
            f"encoder {cfg.encoder._target_} reads {encoder} but the data ({cfg.data._target_}) gives {data}: "
            f"choose an {data} encoder (text: encoder=rnn; image: encoder=cnn, encoder=resnet or "
            f"encoder=efficientnet; audio: encoder=audio), or the task that goes with this data (task=mt for "
            f"text, task=caption for images, task=asr for audio)"
        )


def build_datamodule(cfg: DictConfig, tokenizer_states: dict | None = None) -> L.LightningDataModule:
    """The task's data module; with ``tokenizer_states`` (from a checkpoint) it reuses that vocabulary."""
    datamodule = instantiate(cfg.data)
    if tokenizer_states is not None:
        datamodule.load_state_dict(tokenizer_states)
    return datamodule


def build_encoder(cfg: DictConfig, datamodule: L.LightningDataModule) -> nn.Module:
    """The encoder with what the data gives it: its sizes (``encoder_kwargs()``) and, for an encoder that reads
    any modality (its class's ``modality`` is None: the Transformer), which one the data module gives."""
    options = dict(datamodule.encoder_kwargs())
    if get_class(cfg.encoder._target_).modality is None:
        options["modality"] = datamodule.modality
    return instantiate(cfg.encoder, **options)


def share_frozen_features(encoder: nn.Module, datamodule: L.LightningDataModule) -> None:
    """An encoder with a frozen part (``frozen_features()``: the pretrained image encoders) lets a data module
    that can store features (``use_frozen_features``: captions) compute that part once instead of every step."""
    frozen = getattr(encoder, "frozen_features", None)
    use = getattr(datamodule, "use_frozen_features", None)
    extractor = frozen() if frozen is not None else None
    if extractor is not None and use is not None:
        use(extractor)


def build_model(cfg: DictConfig, datamodule: L.LightningDataModule) -> Seq2Seq:
    """Encoder from ``cfg.encoder``, attention partial from ``cfg.attention``, decoder around both."""
    tokenizers = datamodule.tokenizers()
    target = tokenizers["target"]
    encoder = build_encoder(cfg, datamodule)
    share_frozen_features(encoder, datamodule)
    decoder = instantiate(
        cfg.decoder,
        vocab_size=target.vocab_size,
        pad_id=target.pad_id,
        memory_dim=encoder.output_dim,
        attention=instantiate(cfg.attention),
    )
    model = instantiate(cfg.model, encoder=encoder, decoder=decoder, tokenizers=tokenizers)
    # set after instantiation: Hydra would try to instantiate the _target_ entries inside it
    model.run_config = OmegaConf.to_container(cfg, resolve=True)
    return model


def instantiate_all(group: DictConfig | None) -> list:
    """Instantiate every entry of a dict-of-configs group (callbacks, loggers); ``null`` entries are off."""
    if not group:
        return []
    return [instantiate(entry) for entry in group.values() if entry is not None and "_target_" in entry]
