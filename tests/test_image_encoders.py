"""Image encoders: Memory over a grid of cells, ResNet weights from a file or a clear error offline."""

from __future__ import annotations

import urllib.error

import pytest
import torch
import torchvision

from attend.encoders import CNNEncoder, ResNetEncoder, WeightsError


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
