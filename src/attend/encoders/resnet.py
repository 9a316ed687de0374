"""torchvision ResNet cut before pooling: the cells of its last stage are the memory."""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision
from torch import Tensor, nn

from attend.encoders.pretrained_grid import PretrainedGrid

DEPTHS = {18: 512, 34: 512, 50: 2048, 101: 2048}  # depth -> channels of the last stage


class WeightsError(ValueError):
    """ResNet weights that cannot be had; the message says how to supply them."""


def load_resnet_weights(net: nn.Module, depth: int, weights: str) -> None:
    """Load ``weights``: a local checkpoint file, or a torchvision weights name (downloaded once)."""
    path = Path(weights).expanduser()
    if path.suffix in (".pth", ".pt", ".ckpt", ".bin") or path.exists():
        if not path.is_file():
            raise WeightsError(f"encoder.weights={weights!r}: no such file")
        state = torch.load(path, map_location="cpu", weights_only=True)
        state = state.get("state_dict", state)
    else:
        name = weights if "." in weights else f"ResNet{depth}_Weights.{weights}"
        try:
            enum = torchvision.models.get_weight(name)
        except (ValueError, KeyError) as error:
            raise WeightsError(
                f"encoder.weights={weights!r} is neither a file nor a torchvision weights name "
                f"(for example IMAGENET1K_V1 or ResNet{depth}_Weights.IMAGENET1K_V1)"
            ) from error
        try:
            state = enum.get_state_dict(progress=False)
        except OSError as error:  # URLError is an OSError: no network here
            raise WeightsError(
                f"cannot download {name} ({error}); this machine may be offline. Download {enum.url} "
                f"where there is a network and pass encoder.weights=/path/to/{Path(enum.url).name}, or copy "
                f"the file into {Path(torch.hub.get_dir()) / 'checkpoints'}"
            ) from error
    state = {key: value for key, value in state.items() if not key.startswith("fc.")}
    try:
        missing, unexpected = net.load_state_dict(state, strict=False)
    except RuntimeError as error:  # shapes differ: another depth
        raise WeightsError(f"encoder.weights={weights!r} does not fit a ResNet-{depth}: {str(error)[:300]}") from error
    missing = [key for key in missing if not key.startswith("fc.")]
    if missing or unexpected:
        raise WeightsError(
            f"encoder.weights={weights!r} does not fit a ResNet-{depth}: "
            f"missing {missing[:3]}..., unexpected {unexpected[:3]}..."
        )


class ResNetEncoder(PretrainedGrid):
    """He et al. 2016, ResNet-18/34/50/101 without its average pool and classifier.

    224x224 images give a 7x7 grid (stride 32). ``weights``: null (random), a local checkpoint
    file, or a torchvision weights name (downloaded once into the torch hub cache). ``freeze``
    keeps the ResNet fixed (its batch norm in eval mode too) and trains only the projection;
    otherwise it is fine-tuned. ``output_dim`` adds a 1x1 projection (null: the stage's channels).
    """

    modality = "image"

    def __init__(
        self,
        depth: int = 18,
        weights: str | None = None,
        freeze: bool = False,
        output_dim: int | None = 256,
        coordinates: bool = False,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if depth not in DEPTHS:
            raise ValueError(f"encoder.depth must be one of {sorted(DEPTHS)}, got {depth}")
        net = getattr(torchvision.models, f"resnet{depth}")(weights=None)
        if weights:
            load_resnet_weights(net, depth, str(weights))
        self.body = nn.Sequential(*list(net.children())[:-2])  # up to layer4: (B, C, H/32, W/32)
        self.body.pretrained = bool(weights)  # model.init leaves loaded weights alone
        self.head(DEPTHS[depth], freeze, output_dim, coordinates, dropout)

    def body_features(self, images: Tensor) -> Tensor:
        """images (B, 3, H, W), ImageNet-normalised -> (B, C, H/32, W/32)."""
        return self.body(images)
