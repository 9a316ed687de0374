"""A saved run: an Attend checkpoint read safely, with its run config in today's form and this command's overrides
applied (``load_run``, the one way eval.py, predict.py, averaging and ``model.init_from`` read a checkpoint), and
the model and data rebuilt from the config and tokenizers saved inside it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch
from omegaconf import DictConfig

from attend.builder import build_datamodule, build_model, share_frozen_features
from attend.checkpoints.files import UnreadableCheckpointError, read_checkpoint
from attend.checkpoints.saved_config import run_config
from attend.config.errors import ConfigError


@dataclass(frozen=True)
class SavedRun:
    """A checkpoint and the config to rebuild it with: what it saved, upgraded, with the command's overrides."""

    path: Path
    checkpoint: dict
    config: DictConfig

    @property
    def tokenizers(self) -> dict:
        """The fitted tokenizers' states, for ``build_datamodule(tokenizer_states=...)``."""
        return datamodule_state(self.checkpoint, self.path)

    def with_checkpoint(self, checkpoint: dict, path: str | Path) -> SavedRun:
        """The same run with other weights (an average of its checkpoints), written at ``path``."""
        return replace(self, checkpoint=checkpoint, path=Path(path))


def load_run(path: str | Path, cfg: DictConfig | None = None, mmap: bool = False) -> SavedRun:
    """Read the checkpoint at ``path`` (weights only: a file that would run code is refused) and its run config:
    saved by an older Attend, upgraded to today's form; with ``cfg`` (eval.py's or predict.py's config), the
    command's search options, cache folder and test data applied (``attend.checkpoints.saved_config``).
    ``mmap``: tensors read from the file as they are used (averaging reads several)."""
    checkpoint = load_checkpoint(path, mmap)
    return SavedRun(Path(path), checkpoint, run_config(checkpoint, cfg))


def load_checkpoint(path: str | Path, mmap: bool = False) -> dict:
    """The checkpoint dict; a clear error for a missing file or a file Attend did not write."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"checkpoint {str(path)!r} does not exist: pass ckpt_path=outputs/<task>/runs/<time>/checkpoints/best.ckpt"
        )
    try:
        checkpoint = read_checkpoint(path, mmap=mmap)
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


def restored_model(run: SavedRun, datamodule, device: torch.device | None = None):
    """The model the run's config describes with the checkpoint's weights, in evaluation mode; its frozen features
    (if the data stores them) computed on ``device`` (None: the CPU)."""
    model = build_model(run.config, datamodule, share_features=False)
    model.load_state_dict(run.checkpoint["state_dict"])
    share_frozen_features(model.encoder, datamodule, device)  # the saved body's features, not a fresh one's
    model.eval()
    return model


def restore(run: SavedRun):
    """(datamodule, model) of a saved run."""
    datamodule = build_datamodule(run.config, tokenizer_states=run.tokenizers)
    return datamodule, restored_model(run, datamodule)
