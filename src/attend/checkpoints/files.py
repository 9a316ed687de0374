"""Checkpoint files that are never half written, never hold NaN weights, and are read without running code."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO


class NonFiniteWeightsError(RuntimeError):
    """A checkpoint would have stored NaN or infinite weights."""


class UnreadableCheckpointError(ValueError):
    """A checkpoint file is missing, truncated, or holds objects whose loading would run code."""


def read_checkpoint(path: str | os.PathLike, mmap: bool = False) -> dict[str, Any]:
    """A checkpoint's contents, read with ``torch.load(weights_only=True)``: tensors and plain data only (what Attend
    and Lightning write), so a crafted pickle cannot run code here. ``mmap``: tensors are read as they are used."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as error:
        refused = re.search(r"Unsupported global: GLOBAL (\S+)", str(error))
        if refused is None:  # not a pickle of plain data at all: a text file, a truncated one
            raise UnreadableCheckpointError(f"cannot read checkpoint {str(path)!r}: it is not a PyTorch checkpoint "
                                            "(truncated, or another kind of file)") from error
        raise UnreadableCheckpointError(
            f"refusing to load {str(path)!r}: it holds {refused.group(1)}, an object other than tensors and plain "
            "data, whose loading could run code. Attend loads only checkpoints of the kind it writes; re-save the "
            "weights of a file you trust as a plain state dict") from error
    except Exception as error:  # a truncated or foreign file: say which and why
        raise UnreadableCheckpointError(f"cannot read checkpoint {str(path)!r}: {error}") from error
    if not isinstance(checkpoint, dict):
        raise UnreadableCheckpointError(f"{str(path)!r} is not a checkpoint: it holds a {type(checkpoint).__name__}, "
                                        "not a dict")
    return checkpoint


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes ``<name>.<pid>.tmp`` next to the checkpoint, then renames it into place: a run killed while
    saving leaves the previous checkpoint whole. Refuses weights that are not all finite."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        refuse_nonfinite(checkpoint.get("state_dict", {}), path)
        path = Path(path)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        super().save_checkpoint(checkpoint, partial, storage_options)
        os.replace(partial, path)


def refuse_nonfinite(state_dict: dict[str, Any], path) -> None:
    """Raise NonFiniteWeightsError naming the first tensor with a NaN or inf."""
    for name, tensor in state_dict.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise NonFiniteWeightsError(
                f"not writing {path}: the weight {name} holds NaN or inf (training diverged); the last checkpoint "
                f"written is intact. Resume from it with a lower optim.optimizer.lr or trainer.gradient_clip_val"
            )
