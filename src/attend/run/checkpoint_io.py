"""Checkpoint files that are never half written and never hold NaN weights."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO


class NonFiniteWeightsError(RuntimeError):
    """A checkpoint would have stored NaN or infinite weights."""


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
