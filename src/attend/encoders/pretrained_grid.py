"""What the pretrained image encoders share: a backbone kept frozen or fine-tuned, and its cells projected."""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor, nn

from attend.encoders.frozen_part import on_device
from attend.encoders.image_cnn import coordinate_channels, grid_memory
from attend.memory import Memory


class PretrainedGrid(nn.Module):
    """A backbone ``body`` (B, 3, H, W) -> (B, C, h, w) whose cells become the memory.

    ``freeze`` keeps the body fixed, its batch norm in eval mode too; ``coordinates`` adds each cell's
    (x, y); ``output_dim`` adds a 1x1 projection with ReLU (null: the body's C channels). Subclasses set
    ``self.body`` and call ``head`` in ``__init__``, and write ``body_features`` (normalised pixels -> the body's
    features).

    A frozen body gives the same features for the same pixels, so the data may compute them once
    (``frozen_features``, ``attend.data.images.features``): ``forward`` then receives those (B, C, h, w)
    features instead of (B, 3, H, W) pixels, told apart by their channels.
    """

    def head(self, channels: int, freeze: bool, output_dim: int | None, coordinates: bool, dropout: float) -> None:
        """Freeze the body if asked, and build the projection of its ``channels``-wide cells."""
        self.freeze = freeze
        self.body_channels = channels
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

    def body_features(self, images: Tensor) -> Tensor:
        """ImageNet-normalised (B, 3, H, W) -> the body's features (B, C, h, w)."""
        raise NotImplementedError

    def forward(self, images: Tensor, lengths: Tensor | None = None) -> Memory:
        """images (B, 3, H, W), ImageNet-normalised, or the frozen body's stored features (B, C, h, w) -> Memory
        over the cells."""
        if images.shape[1] == self.body_channels and self.freeze:
            return self.cells(images.to(next(self.parameters()).dtype))  # features computed once by the data
        return self.cells(self.body_features(images))

    def frozen_features(self, device: torch.device | None = None) -> FrozenBody | None:
        """The frozen body as a feature extractor for the data to run once (on ``device``; None: where the body is);
        None when the body is trained."""
        return FrozenBody(self, device) if self.freeze else None

    def cells(self, features: Tensor) -> Memory:
        """The body's features (B, C, h, w) -> Memory over the h x w cells."""
        if self.coordinates:
            features = torch.cat([features, coordinate_channels(features)], dim=1)  # (B, C + 2, h, w)
        if self.project is not None:
            features = torch.relu(self.project(features))  # (B, D, h, w)
        return grid_memory(features, self.dropout)


class FrozenBody:
    """A frozen encoder's ``body_features`` as a ``attend.data.images.features.FeatureExtractor``: run in
    evaluation mode without gradients, named by the encoder's class and a hash of the body's weights (a store of
    its features is found again only by the same weights). On another ``device`` than the encoder's (the run's GPU
    while the model is still built on the CPU) it runs a copy moved there; the encoder stays where it is."""

    def __init__(self, encoder: PretrainedGrid, device: torch.device | None = None) -> None:
        self.encoder = on_device(encoder, device)
        digest = hashlib.sha1()
        for name, tensor in encoder.body.state_dict().items():
            digest.update(name.encode("utf-8"))
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        self.key = f"{type(encoder).__name__}-{digest.hexdigest()[:16]}"

    @property
    def device(self) -> torch.device:
        return next(self.encoder.body.parameters()).device

    def __call__(self, images: Tensor) -> Tensor:
        """ImageNet-normalised (B, 3, H, W) float -> (B, C, h, w) float32 features, computed on ``device``."""
        parameter = next(self.encoder.body.parameters())
        self.encoder.body.eval()  # frozen: its batch norm keeps the loaded statistics (a new module is in train mode)
        with torch.inference_mode():
            features = self.encoder.body_features(images.to(parameter.device, parameter.dtype))
        return features.float().cpu()

