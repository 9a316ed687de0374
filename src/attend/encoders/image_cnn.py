"""A small convolutional image encoder trained from scratch: the cells of its last feature map are the memory."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.memory import Memory


def coordinate_channels(features: Tensor) -> Tensor:
    """Two channels holding each cell's x and y position in [-1, 1]: (B, C, H, W) -> (B, 2, H, W)."""
    batch, _, height, width = features.shape
    ys = torch.linspace(-1.0, 1.0, height, device=features.device, dtype=features.dtype)
    xs = torch.linspace(-1.0, 1.0, width, device=features.device, dtype=features.dtype)
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")  # (H, W) each
    return torch.stack([grid_x, grid_y]).unsqueeze(0).expand(batch, -1, -1, -1)


def grid_memory(features: Tensor, dropout: nn.Module) -> Memory:
    """Memory over the cells of a feature map (B, D, H, W): values (B, H*W, D) row-major, grid (H, W)."""
    batch, _, height, width = features.shape
    values = features.flatten(2).transpose(1, 2)  # (B, H*W, D)
    mask = torch.ones(batch, height * width, dtype=torch.bool, device=features.device)
    return Memory(values=dropout(values), mask=mask, grid=(height, width), final=values.mean(dim=1))


class CNNEncoder(nn.Module):
    """Blocks of two 3x3 convolutions (batch norm, ReLU) and a 2x2 max-pool; each block halves the grid.

    Sized for a CPU: 64x64 images and ``channels=[32, 64, 128]`` give an 8x8 grid of 64 cells. With
    ``coordinates`` each cell also carries its (x, y) position (CoordConv, Liu et al. 2018), so a
    context vector says *where* it looked: captions with "to the left of" need that. A 1x1
    convolution maps the last block to ``output_dim``.
    """

    modality = "image"

    def __init__(
        self,
        channels: list[int] | tuple[int, ...] = (32, 64, 128),
        output_dim: int = 256,
        coordinates: bool = True,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        blocks, in_channels = [], 3
        for out_channels in channels:
            blocks += [
                nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(inplace=True),
                nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ]
            in_channels = out_channels
        self.features = nn.Sequential(*blocks)
        self.coordinates = coordinates
        self.project = nn.Conv2d(in_channels + (2 if coordinates else 0), output_dim, 1)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = output_dim
        self.downsampling = 2 ** len(channels)

    def forward(self, images: Tensor, lengths: Tensor | None = None) -> Memory:
        """images (B, 3, H, W), normalised -> Memory over the (H/2^n) x (W/2^n) cells."""
        features = self.features(images)  # (B, C, h, w)
        if self.coordinates:
            features = torch.cat([features, coordinate_channels(features)], dim=1)  # (B, C+2, h, w)
        return grid_memory(torch.relu(self.project(features)), self.dropout)  # values (B, h*w, D)
