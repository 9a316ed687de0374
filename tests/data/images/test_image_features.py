"""A frozen image encoder's features computed once into the example store (attend.data.images.features)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attend.builder import share_frozen_features
from attend.data import DataModule, WordTokenizer
from attend.data.images import ShapeScenes
from attend.data.images.features import crop_versions, normalise, stored_features
from attend.data.images.pixels import store_pixels
from attend.encoders import EfficientNetEncoder
from attend.encoders.resnet import ResNetEncoder
from tests.helpers.datamodules import caption_datamodule

SIZE = 64  # 2x2 cells of EfficientNet-Lite0


def encoder(freeze: bool = True) -> EfficientNetEncoder:
    torch.manual_seed(0)  # left in training mode, as the builder makes it: the frozen body must still run in eval
    return EfficientNetEncoder(freeze=freeze, output_dim=16, dropout=0.0, pretrained=False)


def datamodule(cache_dir: Path, **kwargs) -> DataModule:
    source = ShapeScenes(n_train=12, n_val=4, n_test=4, image_size=SIZE)
    settings = {"image_size": SIZE, "batch_size": 4, "eval_batch_size": 4, "augment": False, **kwargs}
    dm = caption_datamodule(source, WordTokenizer(lowercase=True), cache_dir=cache_dir, **settings)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def pixels(dm: DataModule, split: str, row: int) -> torch.Tensor:
    """(3, H, W) uint8 of one image of a split's encoded store (shape scenes: row == example == record)."""
    return store_pixels(dm.encoded[split], row)


def features_of(dm: DataModule, split: str):
    """The split's feature store (after the frozen features were shared)."""
    return dm.plugin.features[dm.encoded[split].folder.name]


class CountingExtractor:
    """The frozen body of ``net``, counting the images it is asked for."""

    def __init__(self, net: EfficientNetEncoder) -> None:
        self.inner = net.frozen_features()
        self.key = self.inner.key
        self.images = 0

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        self.images += len(images)
        return self.inner(images)


def test_stored_features_are_the_frozen_body_run_on_the_pixels(tmp_path):
    net = encoder()
    dm = datamodule(tmp_path)
    share_frozen_features(net, dm)
    dataset = dm.datasets["val"]
    images = torch.stack([pixels(dm, "val", i) for i in range(len(dataset))])  # (N, 3, H, W) uint8
    expected = net.eval().body_features(normalise(images)).detach()  # (N, 1280, 2, 2)
    stored = torch.stack([dataset[i]["src"] for i in range(len(dataset))])
    assert stored.shape == expected.shape == (len(dataset), 1280, 2, 2)
    torch.testing.assert_close(stored, expected, atol=0.02, rtol=0.01)  # float16 in the store


def test_the_encoder_gives_the_same_memory_from_stored_features_as_from_pixels(tmp_path):
    net = encoder()
    dm = datamodule(tmp_path)
    pixel_batch = dm.example_batch(4, "val")  # set up before the features were shared: pixels
    share_frozen_features(net, dm)
    feature_batch = dm.example_batch(4, "val")
    assert pixel_batch["src"].shape[1] == 3 and feature_batch["src"].shape[1] == 1280
    net.eval()
    with torch.no_grad():
        from_pixels = net(pixel_batch["src"]).values
        from_features = net(feature_batch["src"]).values
    torch.testing.assert_close(from_features, from_pixels, atol=0.02, rtol=0.01)


def test_evaluation_batches_carry_the_pixels_the_plots_draw(tmp_path):
    net = encoder()
    dm = datamodule(tmp_path)
    share_frozen_features(net, dm)
    batch = dm.example_batch(2, "val")
    assert batch["pixels"].dtype == torch.uint8
    image = dm.readable_source(batch, 1)
    assert image.shape == (SIZE, SIZE, 3)
    assert (torch.from_numpy(image).permute(2, 0, 1) == pixels(dm, "val", 1)).all()


def test_a_second_start_reads_the_stored_features_without_running_the_encoder(tmp_path):
    net = encoder()
    first = CountingExtractor(net)
    share_frozen_features_with(datamodule(tmp_path), first)
    assert first.images == 12 + 4 + 4
    again = CountingExtractor(net)
    dm = datamodule(tmp_path)
    share_frozen_features_with(dm, again)
    assert again.images == 0
    assert dm.datasets["train"][0]["src"].shape == (1280, 2, 2)


def test_other_weights_get_their_own_feature_store(tmp_path):
    share_frozen_features(encoder(), datamodule(tmp_path))
    torch.manual_seed(1)
    other = EfficientNetEncoder(freeze=True, output_dim=16, pretrained=False).eval()
    counting = CountingExtractor(other)
    assert counting.key != encoder().frozen_features().key
    share_frozen_features_with(datamodule(tmp_path), counting)
    assert counting.images == 20


def test_training_picks_among_the_image_and_its_fixed_crops(tmp_path):
    net = encoder()
    dm = datamodule(tmp_path, feature_crops=2)
    counting = CountingExtractor(net)
    share_frozen_features_with(dm, counting)
    assert counting.images == 12 * 3 + 4 + 4  # training images three times (the image, two crops), the rest once
    train = dm.datasets["train"]
    versions = [stored_features(features_of(dm, "train"), 0, v) for v in range(3)]
    assert not torch.equal(versions[0], versions[1]) and not torch.equal(versions[1], versions[2])
    torch.manual_seed(0)
    seen = {min(range(3), key=lambda v: (train[0]["src"] - versions[v]).abs().sum().item()) for _ in range(30)}
    assert seen == {0, 1, 2}
    val = dm.datasets["val"]
    assert all(torch.equal(val[0]["src"], val[0]["src"]) for _ in range(3))  # evaluation: the image only


def test_crops_are_seeded_per_image():
    pixels = torch.randint(0, 256, (3, SIZE, SIZE), dtype=torch.uint8)
    assert torch.equal(crop_versions(pixels, 2, seed=7), crop_versions(pixels, 2, seed=7))
    assert not torch.equal(crop_versions(pixels, 2, seed=7), crop_versions(pixels, 2, seed=8))
    assert torch.equal(crop_versions(pixels, 2, seed=7)[0], pixels)


@pytest.mark.parametrize("make", [lambda: encoder(freeze=False), lambda: ResNetEncoder(depth=18, freeze=False)])
def test_a_trained_body_is_not_precomputed(tmp_path, make):
    net = make()
    assert net.frozen_features() is None
    dm = datamodule(tmp_path)
    share_frozen_features(net, dm)
    assert dm.example_batch(2, "train")["src"].shape[1] == 3


def test_precompute_features_false_keeps_pixels(tmp_path):
    dm = datamodule(tmp_path, precompute_features=False)
    share_frozen_features(encoder(), dm)
    assert dm.example_batch(2, "val")["src"].shape[1] == 3
    assert "pixels" not in dm.example_batch(2, "val")


def test_negative_feature_crops_is_refused(tmp_path):
    with pytest.raises(ValueError, match="data.modality.feature_crops"):
        datamodule(tmp_path, feature_crops=-1)


def share_frozen_features_with(dm: DataModule, extractor) -> None:
    """What the builder does, with a given extractor (to count its calls)."""
    dm.use_frozen_features(extractor)


def test_the_builder_shares_features_of_the_body_the_model_runs(tmp_path):
    """Through the builder, as train.py builds it: the stored features are those of the model's own (randomly
    initialised, frozen) body after ``Seq2Seq`` initialised its modules, not of the body before that (a frozen ResNet
    without weights: mean |feature| about 1 before, 0.1 after)."""
    from attend.builder import build_datamodule, build_model
    from attend.config.compose import compose_config

    cfg = compose_config([
        "task=caption", "data=shapes", "encoder=resnet", "encoder.freeze=true", "data.source.n_train=8",
        "data.source.n_val=2", "data.source.n_test=2", f"paths.cache_dir={tmp_path}", "data.prepare_workers=0",
    ], output_dir=tmp_path)
    dm = build_datamodule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    model = build_model(cfg, dm)
    store = dm.plugin.features[dm.encoded["val"].folder.name]
    expected = model.encoder.frozen_features()(normalise(pixels(dm, "val", 0)[None]))[0]
    assert expected.abs().mean() > 1e-3  # a body whose features float16 can hold
    assert torch.allclose(stored_features(store, 0), expected, atol=1e-3, rtol=1e-2)  # float16 storage


def test_features_are_computed_on_the_runs_accelerator_by_a_copy_of_the_body():
    """Another device than the encoder's (the run's GPU while the model is built on the CPU; "meta" stands for it
    here) gets a copy of the body moved there; the model's own body stays, and the store's key is the same."""
    net = encoder()
    elsewhere = net.frozen_features(torch.device("meta"))
    assert elsewhere.device.type == "meta" and next(net.parameters()).device.type == "cpu"
    assert elsewhere.key == net.frozen_features().key
    assert net.frozen_features(torch.device("cpu")).encoder is net  # already there: no copy


@pytest.mark.parametrize("accelerator, devices, local_rank, cuda, expected", [
    ("cpu", 1, None, True, "cpu"),
    ("auto", 1, None, False, "cpu"),
    ("auto", 1, None, True, "cuda:0"),
    ("gpu", [1], None, True, "cuda:1"),
    ("gpu", 2, "1", True, "cuda:1"),  # DDP: this process's local rank
])
def test_the_extraction_device_follows_the_trainer(monkeypatch, accelerator, devices, local_rank, cuda, expected):
    from attend.builder import extraction_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("SLURM_LOCALID", raising=False)
    if local_rank is not None:
        monkeypatch.setenv("LOCAL_RANK", local_rank)
    assert extraction_device(accelerator, devices) == torch.device(expected)


def test_a_changed_crop_range_gets_its_own_feature_store(tmp_path, monkeypatch):
    import attend.data.images.features as features

    dm = datamodule(tmp_path, feature_crops=1)
    share_frozen_features(encoder(), dm)
    train, val = features_of(dm, "train").folder, features_of(dm, "val").folder
    monkeypatch.setattr(features, "CROP_SCALE", (0.5, 1.0))
    share_frozen_features(encoder(), dm)
    assert features_of(dm, "train").folder != train
    assert features_of(dm, "val").folder == val  # no crops: nothing in its key changed
