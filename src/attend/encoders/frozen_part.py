"""A frozen encoder part run once for the data, on the run's accelerator, by a copy when the model is elsewhere."""

from __future__ import annotations

import copy

import torch
from torch import nn


def on_device(module: nn.Module, device: torch.device | None) -> nn.Module:
    """``module`` itself when it is on ``device`` (or ``device`` is None), else a copy of it moved there, in
    evaluation mode: a frozen part run once for the data, leaving the model's own weights where they are."""
    here = next(module.parameters()).device
    if device is None or torch.device(device) == here:
        return module
    return copy.deepcopy(module).to(device).eval()
