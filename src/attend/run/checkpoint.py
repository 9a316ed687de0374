"""Load an Attend checkpoint and rebuild its model and data from the config and tokenizers saved inside it."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from attend.builder import build_datamodule, build_model, share_frozen_features
from attend.data.options import upgrade
from attend.run.checkpoint_io import UnreadableCheckpointError, read_checkpoint
from attend.run.config_checks import ConfigError


def load_checkpoint(path: str | Path) -> dict:
    """The checkpoint dict; a clear error for a missing file or a file Attend did not write."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"checkpoint {str(path)!r} does not exist: pass ckpt_path=outputs/<task>/runs/<time>/checkpoints/best.ckpt"
        )
    try:
        checkpoint = read_checkpoint(path)
    except UnreadableCheckpointError as error:
        raise ConfigError(str(error)) from error
    if "attend" not in checkpoint:
        raise ConfigError(f"{str(path)!r} is not an Attend checkpoint (it has no saved run config)")
    datamodule_state(checkpoint, path)  # refused here, before anything is built
    return checkpoint


def datamodule_state(checkpoint: dict, path: str | Path | None = None) -> dict:
    """The data module's state (``{"tgt_tokenizer": ..., "src_tokenizer": ...}`` for text sources) that Lightning
    saves under the module's class name, whatever that name is; for checkpoints written before the tokenizers
    were saved only there, the model's copy in ``checkpoint["attend"]["tokenizers"]``."""
    for value in checkpoint.values():
        if isinstance(value, dict) and "tgt_tokenizer" in value:
            return value
    copy = checkpoint.get("attend", {}).get("tokenizers")
    if copy is None:
        name = repr(str(path)) if path is not None else "the checkpoint"
        raise ConfigError(f"{name} holds no tokenizers: neither a data module's state nor attend.tokenizers")
    return copy


def saved_config(checkpoint: dict, overrides: dict | None = None) -> DictConfig:
    """The run config a checkpoint saved, in today's form; ``overrides`` are dotted keys set on it."""
    config: DictConfig = OmegaConf.create(checkpoint["attend"]["config"])
    config.data = upgrade(config.data)  # a data config saved before the data modules became one
    for key, value in (overrides or {}).items():
        OmegaConf.update(config, key, value, force_add=True)
    return config


def restored_model(config: DictConfig, datamodule, checkpoint: dict, device: torch.device | None = None):
    """The model ``config`` describes with the checkpoint's weights, in evaluation mode; its frozen features (if the
    data stores them) computed on ``device`` (None: the CPU)."""
    model = build_model(config, datamodule, share_features=False)
    model.load_state_dict(checkpoint["state_dict"])
    share_frozen_features(model.encoder, datamodule, device)  # the saved body's features, not a fresh one's
    model.eval()
    return model


def restore(checkpoint: dict, overrides: dict | None = None):
    """(config, datamodule, model) of a checkpoint; ``overrides`` are dotted keys set on the saved config."""
    config = saved_config(checkpoint, overrides)
    datamodule = build_datamodule(config, tokenizer_states=datamodule_state(checkpoint))
    return config, datamodule, restored_model(config, datamodule, checkpoint)
