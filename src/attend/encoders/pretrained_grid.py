"""What the pretrained image encoders share: a backbone kept frozen or fine-tuned, and its cells projected."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.encoders.image_cnn import coordinate_channels, grid_memory
from attend.memory import Memory


class PretrainedGrid(nn.Module):
    """A backbone ``body`` (B, 3, H, W) -> (B, C, h, w) whose cells become the memory.

    ``freeze`` keeps the body fixed, its batch norm in eval mode too; ``coordinates`` adds each cell's
    (x, y); ``output_dim`` adds a 1x1 projection with ReLU (null: the body's C channels). Subclasses set
    ``self.body`` and call ``head`` in ``__init__``, then ``cells`` on the body's features in ``forward``.
    """

    def head(self, channels: int, freeze: bool, output_dim: int | None, coordinates: bool, dropout: float) -> None:
        """Freeze the body if asked, and build the projection of its ``channels``-wide cells."""
        self.freeze = freeze
        if freeze:
            self.body.requires_grad_(False)
        self.coordinates = coordinates
        channels += 2 if coordinates else 0
        self.project = nn.Conv2d(channels, output_dim, 1) if output_dim else None
        self.output_dim = output_dim or channels
        self.dropout = nn.Dropout(dropout)

    def train(self, mode: bool = True) -> PretrainedGrid:
        super().train(mode)
        if self.freeze:
            self.body.eval()  # frozen batch-norm statistics stay as loaded
        return self

    def cells(self, features: Tensor) -> Memory:
        """The body's features (B, C, h, w) -> Memory over the h x w cells."""
        if self.coordinates:
            features = torch.cat([features, coordinate_channels(features)], dim=1)  # (B, C + 2, h, w)
        if self.project is not None:
            features = torch.relu(self.project(features))  # (B, D, h, w)
        return grid_memory(features, self.dropout)
