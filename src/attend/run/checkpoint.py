"""Load an Attend checkpoint and rebuild its model and data from the config saved inside it."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from attend.builder import ConfigError, build_datamodule, build_model


def load_checkpoint(path: str | Path) -> dict:
    """The checkpoint dict; a clear error for a missing file or a file Attend did not write."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"checkpoint {str(path)!r} does not exist: pass ckpt_path=outputs/<task>/runs/<time>/checkpoints/best.ckpt"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # a truncated or foreign file: say which and why
        raise ConfigError(f"cannot read checkpoint {str(path)!r}: {error}") from error
    if "attend" not in checkpoint:
        raise ConfigError(
            f"{str(path)!r} is not an Attend checkpoint (it has no saved config and vocabulary)"
        )
    return checkpoint


def restore(checkpoint: dict, overrides: dict | None = None):
    """(config, datamodule, model) of a checkpoint; ``overrides`` are dotted keys set on the saved config."""
    config: DictConfig = OmegaConf.create(checkpoint["attend"]["config"])
    for key, value in (overrides or {}).items():
        OmegaConf.update(config, key, value, force_add=True)
    datamodule = build_datamodule(config, tokenizer_states=checkpoint["attend"]["tokenizers"])
    model = build_model(config, datamodule)
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    return config, datamodule, model
