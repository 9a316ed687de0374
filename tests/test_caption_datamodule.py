"""The captioning datamodule: image batches, the image store, unreadable images, checkpoint state, readable sources."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

from attend.data import CaptionDataModule, WordTokenizer
from attend.data.images import Flickr8k, ImageCaption, ImageReadError, KarpathyJSON, ShapeScenes, read_rgb
from attend.data.images.pixels import denormalize, image_transform, square_resize, to_uint8_tensor
from attend.plots import close_figure, image_attention
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
FLICKR8K = FIXTURES / "flickr8k"
KARPATHY = FIXTURES / "karpathy"
GIRL, DOGS, RAINBOW = "1000268201_693b08cb0e.jpg", "1001773457_577c3a7d70.jpg", "1002674143_1b742ab4b8.jpg"
SIZE = 32


def shapes(n_train: int = 40, n_val: int = 8, n_test: int = 8) -> ShapeScenes:
    return ShapeScenes(n_train=n_train, n_val=n_val, n_test=n_test, image_size=SIZE)


def datamodule(source, cache_dir: Path | None, **kwargs) -> CaptionDataModule:
    settings = {"image_size": SIZE, "batch_size": 8, "eval_batch_size": 8, "augment": False, **kwargs}
    return CaptionDataModule(source, WordTokenizer(lowercase=True), cache_dir=cache_dir, **settings)


def ready(dm: CaptionDataModule) -> CaptionDataModule:
    dm.prepare_data()
    dm.setup("fit")
    return dm


def all_batches(loader) -> list[dict]:
    return list(iter(loader))


def cached_image(dm: CaptionDataModule, split: str, example: int) -> np.ndarray:
    """The stored uint8 pixels (H, W, 3) of one example of a split."""
    return dm.datasets[split].pixels(example).permute(1, 2, 0).numpy()


def image_stores(cache_dir: Path) -> list[Path]:
    """The finished image stores under a cache folder."""
    return sorted(path.parent for path in (cache_dir / "store").glob("images-*/manifest.json"))


def stored_pixels(dm: CaptionDataModule, split: str) -> torch.Tensor:
    """(N, 3, H, W) uint8: the stored pixels of every example of a split, for comparing two runs."""
    dataset = dm.datasets[split]
    return torch.stack([dataset.pixels(i) for i in range(len(dataset))])


def close_to(a: np.ndarray, b: np.ndarray, tolerance: int = 1) -> bool:
    return a.shape == b.shape and int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()) <= tolerance


@pytest.fixture(scope="module")
def shapes_dm(tmp_path_factory: pytest.TempPathFactory) -> CaptionDataModule:
    """A set-up datamodule over 40/8/8 shape scenes; tests must not change it."""
    return ready(datamodule(shapes(), tmp_path_factory.mktemp("cache")))


class FileSource:
    """A tiny source of image files: given splits, images read with read_rgb."""

    def __init__(self, root: Path, splits: dict[str, list[ImageCaption]]) -> None:
        self.root = root
        self._splits = splits

    def settings(self) -> dict:
        return {"root": str(self.root)}

    def splits(self) -> dict[str, list[ImageCaption]]:
        return self._splits

    def load_image(self, record: ImageCaption) -> Image.Image:
        return read_rgb(record.path)


def image_file(folder: Path, name: str, colour: tuple[int, int, int] | None, size: tuple[int, int] = (20, 12)) -> str:
    """Write a solid-colour image (or, with colour None, garbage bytes) and return its path."""
    path = folder / name
    if colour is None:
        path.write_bytes(b"definitely not a JPEG" * 8)
    else:
        Image.new("RGB", size, colour).save(path)
    return str(path)


def record(path: str, *captions: str) -> ImageCaption:
    return ImageCaption(key=Path(path).name, captions=captions or ("a picture",), path=path)


# batches ----------------------------------------------------------------------------------------
def test_shapes_train_batch_layout(shapes_dm: CaptionDataModule) -> None:
    dm, tok = shapes_dm, shapes_dm.tokenizer
    batch = next(iter(dm.train_dataloader()))
    B = 8
    assert batch["src"].shape == (B, 3, SIZE, SIZE) and batch["src"].dtype == torch.float32
    assert "src_lengths" not in batch
    assert batch["tgt"].shape[0] == B and batch["tgt_lengths"].max() == batch["tgt"].shape[1]
    assert batch["num_target_tokens"] == int((batch["tgt_lengths"] - 1).sum())
    assert isinstance(batch["references"], list) and len(batch["references"]) == B
    assert isinstance(batch["objects"], list) and len(batch["objects"]) == B
    for row in range(B):
        n = int(batch["tgt_lengths"][row])
        assert batch["tgt"][row, 0] == tok.bos_id and batch["tgt"][row, n - 1] == tok.eos_id
        assert (batch["tgt"][row, n:] == tok.pad_id).all()
        references = batch["references"][row]
        assert isinstance(references, list) and all(isinstance(r, str) for r in references)
        assert tok.decode(batch["tgt"][row]) == references[0]  # the one caption of a scene is the target
        objects = batch["objects"][row]
        assert objects and all(set(o) == {"kind", "box"} for o in objects)
        assert all(o["kind"] in references[0].split() and len(o["box"]) == 4 for o in objects)
        assert all(0 <= v <= 1 for o in objects for v in o["box"])


def test_shapes_eval_batches_one_example_per_image(shapes_dm: CaptionDataModule) -> None:
    records = {r.key: r for split in ("val", "test") for r in shapes(40, 8, 8).splits()[split]}
    for loader in (shapes_dm.val_dataloader(), shapes_dm.test_dataloader()):
        batches = all_batches(loader)
        sources = [s for b in batches for s in b["sources"]]
        assert len(sources) == len(set(sources)) == 8
        for batch in batches:
            assert batch["src"].shape[1:] == (3, SIZE, SIZE)
            for source, references in zip(batch["sources"], batch["references"], strict=True):
                assert references == list(records[source].captions)


def test_model_facing_interface(shapes_dm: CaptionDataModule) -> None:
    assert shapes_dm.tokenizers() == {"target": shapes_dm.tokenizer}
    assert shapes_dm.encoder_kwargs() == {}
    assert shapes_dm.modality == "image" and CaptionDataModule.modality == "image"


def test_flickr8k_one_train_example_per_caption(tmp_path: Path) -> None:
    dm = ready(datamodule(Flickr8k(FLICKR8K), tmp_path))
    splits = Flickr8k(FLICKR8K).splits()
    assert [r.key for r in splits["train"]] == [GIRL]
    train = all_batches(dm.train_dataloader())
    assert len(dm.datasets["train"]) == 5 and sum(len(b["sources"]) for b in train) == 5
    targets = [tuple(dm.tokenizer.strip_specials(row)) for b in train for row in b["tgt"]]
    captions = splits["train"][0].captions
    assert len(set(targets)) == 5 and set(targets) == {tuple(dm.tokenizer.encode(c)) for c in captions}
    for batch in train:
        assert batch["sources"] == [GIRL] * len(batch["sources"])
        assert all(refs == list(captions) for refs in batch["references"])
        assert all(torch.equal(image, batch["src"][0]) for image in batch["src"])  # one image, augment off
    for split, key in (("val", DOGS), ("test", RAINBOW)):
        (batch,) = all_batches(dm.val_dataloader() if split == "val" else dm.test_dataloader())
        record = splits[split][0]
        assert batch["sources"] == [key] and batch["src"].shape == (1, 3, SIZE, SIZE)
        assert batch["references"] == [list(record.captions)] and len(record.captions) == 5
        assert dm.tokenizer.strip_specials(batch["tgt"][0]) == dm.tokenizer.encode(record.captions[0])


def test_karpathy_json_through_the_datamodule(tmp_path: Path) -> None:
    dm = ready(datamodule(KarpathyJSON(KARPATHY / "dataset_flickr8k.json", KARPATHY / "images"), tmp_path))
    assert len(dm.datasets["train"]) == 5 + 2  # restval joins train
    assert [len(dm.datasets[s]) for s in ("val", "test")] == [1, 1]
    assert [len(refs) for refs in next(iter(dm.val_dataloader()))["references"]] == [3]
    assert [len(refs) for refs in next(iter(dm.test_dataloader()))["references"]] == [4]


# image store ------------------------------------------------------------------------------------
class CountingShapes(ShapeScenes):
    """Shape scenes that count rendered images (same class name for every instance: same store key)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.loads = 0

    def load_image(self, record: ImageCaption) -> Image.Image:
        self.loads += 1
        return super().load_image(record)


def test_image_store_is_reused_and_keyed_by_size(tmp_path: Path) -> None:
    settings = {"n_train": 12, "n_val": 3, "n_test": 2, "image_size": SIZE}
    first = CountingShapes(**settings)
    dm = datamodule(first, tmp_path)
    dm.prepare_data()
    stores = image_stores(tmp_path)
    assert len(stores) == 3 and first.loads == 12 + 3 + 2  # one store per split
    dm.setup("fit")
    assert first.loads == 17  # setup opens the stores

    second = CountingShapes(**settings)
    again = ready(datamodule(second, tmp_path))
    assert second.loads == 0
    for split in ("train", "val", "test"):
        assert torch.equal(stored_pixels(again, split), stored_pixels(dm, split))
        assert again.datasets[split].keys == dm.datasets[split].keys

    third = CountingShapes(**settings)
    small = ready(datamodule(third, tmp_path, image_size=16))
    assert third.loads == 17 and small.datasets["val"].pixels(0).shape == (3, 16, 16)
    assert len(image_stores(tmp_path)) == 6
    assert not list((tmp_path / "store").glob("*/.*.tmp"))


# unreadable images ------------------------------------------------------------------------------
def test_unreadable_images_are_skipped_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    red = image_file(tmp_path, "red.png", (220, 30, 30))
    blue = image_file(tmp_path, "blue.png", (30, 70, 220))
    corrupt = image_file(tmp_path, "corrupt.jpg", None)
    missing = str(tmp_path / "missing.jpg")
    splits = {
        "train": [record(red, "a red box"), record(missing), record(corrupt), record(blue, "a blue box")],
        "val": [record(image_file(tmp_path, "green.png", (30, 160, 50)), "a green box")],
        "test": [record(image_file(tmp_path, "grey.png", (128, 128, 128)), "a grey box")],
    }
    dm = datamodule(FileSource(tmp_path, splits), None, max_skip_fraction=1.0)  # half of train is bad
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        ready(dm)
    assert "missing.jpg" in caplog.text and "corrupt.jpg" in caplog.text
    assert "skipped 2 of 4 images" in caplog.text
    train = dm.datasets["train"]
    assert train.keys == ["red.png", "blue.png"] and dm.datasets["val"].keys == ["green.png"]
    # the kept pixels stay aligned with their records
    assert tuple(cached_image(dm, "train", 0)[16, 16]) == (220, 30, 30)
    assert tuple(cached_image(dm, "train", 1)[16, 16]) == (30, 70, 220)
    assert dm.tokenizer.decode(train.captions[1]) == "a blue box"


def test_split_without_a_readable_image_raises(tmp_path: Path) -> None:
    good = image_file(tmp_path, "good.png", (0, 0, 0))
    splits = {
        "train": [record(good)],
        "val": [record(str(tmp_path / "gone.jpg")), record(image_file(tmp_path, "bad.jpg", None))],
        "test": [record(good)],
    }
    dm = datamodule(FileSource(tmp_path, splits), tmp_path)
    with pytest.raises(ImageReadError, match="none of the 2 images"):
        dm.prepare_data()


def test_empty_split_gives_an_empty_dataset(tmp_path: Path) -> None:
    dm = ready(datamodule(shapes(n_train=10, n_val=2, n_test=0), tmp_path))
    assert len(dm.datasets["test"]) == 0 and len(dm.datasets["train"]) == 10


# images -----------------------------------------------------------------------------------------
def test_square_resize_pads_wide_image_on_white() -> None:
    wide = Image.new("RGB", (40, 20), (30, 70, 220))  # blue, a green left edge and a red right edge
    wide.paste((30, 160, 50), (0, 0, 4, 20))
    wide.paste((220, 30, 30), (36, 0, 40, 20))
    out = square_resize(wide, 20)
    assert out.size == (20, 20) and out.mode == "RGB"
    pixels = np.asarray(out).astype(int)
    for corner in (pixels[0, 0], pixels[0, -1], pixels[-1, 0], pixels[-1, -1]):
        assert corner.min() >= 250  # white padding
    assert pixels[0].min() >= 250 and pixels[-1].min() >= 250  # top and bottom rows are padding
    coloured = [y for y in range(20) if pixels[y, 10].min() < 200]
    assert coloured and coloured[0] == 19 - coloured[-1]  # centred vertically
    assert len(coloured) in (10, 11)  # height halved with the width: aspect ratio kept
    assert np.argmax(pixels[10, 0]) == 1 and np.argmax(pixels[10, -1]) == 0  # both edges kept: nothing cut
    assert square_resize(Image.new("RGB", (16, 16)), 16).size == (16, 16)
    assert square_resize(Image.new("RGB", (10, 30)), 12).size == (12, 12)


def test_eval_transform_round_trips_through_denormalize() -> None:
    array = np.random.default_rng(0).integers(0, 256, size=(16, 16, 3), dtype=np.uint8)
    array[0, 0], array[0, 1] = (0, 0, 0), (255, 255, 255)
    image = Image.fromarray(array)
    tensor = to_uint8_tensor(image)
    assert tensor.shape == (3, 16, 16) and tensor.dtype == torch.uint8
    assert np.array_equal(tensor.permute(1, 2, 0).numpy(), array)
    normalised = image_transform(False, 16)(tensor)
    assert normalised.dtype == torch.float32 and normalised.shape == (3, 16, 16)
    back = denormalize(normalised)
    assert back.dtype == np.uint8 and close_to(back, array)


def test_augmented_transform_keeps_the_size() -> None:
    torch.manual_seed(0)
    transform = image_transform(True, 16, augment=True, hflip=True)
    for shape in ((3, 16, 16), (3, 24, 24)):
        out = transform(torch.randint(0, 256, shape, dtype=torch.uint8))
        assert out.shape == (3, 16, 16) and out.dtype == torch.float32


def test_readable_source_gives_the_cached_pixels(shapes_dm: CaptionDataModule) -> None:
    for split, loader in (("train", shapes_dm.train_dataloader()), ("val", shapes_dm.val_dataloader())):
        batch = next(iter(loader))
        for row in range(len(batch["sources"])):
            image = shapes_dm.readable_source(batch, row)
            assert image.shape == (SIZE, SIZE, 3) and image.dtype == np.uint8
            assert close_to(image, cached_image(shapes_dm, split, int(batch["ids"][row])))


def test_batch_from_sources(shapes_dm: CaptionDataModule, tmp_path: Path) -> None:
    path = image_file(tmp_path, "wide.png", (220, 30, 30), size=(40, 20))
    batch = shapes_dm.batch_from_sources([path])
    tok = shapes_dm.tokenizer
    assert batch["src"].shape == (1, 3, SIZE, SIZE) and batch["sources"] == [path]
    assert batch["tgt"].tolist() == [[tok.bos_id, tok.eos_id]] and "src_lengths" not in batch
    expected = to_uint8_tensor(square_resize(read_rgb(path), SIZE)).permute(1, 2, 0).numpy()
    assert close_to(shapes_dm.readable_source(batch, 0), expected)
    with pytest.raises(ImageReadError, match=r"nope\.png"):
        shapes_dm.batch_from_sources([path, str(tmp_path / "nope.png")])


# checkpoint state -------------------------------------------------------------------------------
def test_state_dict_holds_only_the_tokenizer(shapes_dm: CaptionDataModule) -> None:
    state = shapes_dm.state_dict()
    assert set(state) == {"tgt_tokenizer"} and state["tgt_tokenizer"] == shapes_dm.tokenizer.state_dict()
    assert datamodule(shapes(), None).state_dict() == {}  # nothing fitted yet


def test_loaded_vocabulary_is_used_before_setup(shapes_dm: CaptionDataModule, tmp_path: Path) -> None:
    source = shapes(n_train=6, n_val=2, n_test=2)  # fewer scenes: a vocabulary of its own would differ
    own = WordTokenizer(lowercase=True)
    own.fit([c for r in source.splits()["train"] for c in r.captions])
    assert own.state_dict() != shapes_dm.tokenizer.state_dict()
    dm = datamodule(source, tmp_path)
    dm.load_state_dict(shapes_dm.state_dict())
    ready(dm)
    assert dm.state_dict() == shapes_dm.state_dict()
    for r in source.splits()["train"]:
        assert dm.tokenizer.encode(r.captions[0]) == shapes_dm.tokenizer.encode(r.captions[0])
    assert dm.datasets["train"].captions[0] == shapes_dm.tokenizer.encode(source.splits()["train"][0].captions[0])


def test_loading_another_tokenizer_after_setup_retokenizes(tmp_path: Path) -> None:
    source = shapes(n_train=12, n_val=3, n_test=3)
    dm = ready(datamodule(source, tmp_path))
    other = WordTokenizer(lowercase=True)
    other.fit(["of left the to above yellow blue green red large small triangle square circle a"])
    splits = source.splits()
    caption = splits["train"][0].captions[0]
    assert other.encode(caption) != dm.tokenizer.encode(caption)
    dm.load_state_dict({"tgt_tokenizer": other.state_dict()})
    assert dm.state_dict() == {"tgt_tokenizer": other.state_dict()}
    for split in ("train", "val", "test"):
        dataset = dm.datasets[split]
        assert [dataset.captions[i] for i in range(len(dataset))] == [
            other.encode(r.captions[0]) for r in splits[split]
        ]
    batch = next(iter(dm.train_dataloader()))
    for row, references in enumerate(batch["references"]):
        assert other.decode(batch["tgt"][row]) == references[0]


# length filter ----------------------------------------------------------------------------------
def test_long_training_captions_are_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = shapes()
    splits = source.splits()
    too_long = sum(len(c.split()) > 4 for r in splits["train"] for c in r.captions)
    assert 0 < too_long < 40
    dm = datamodule(source, tmp_path, max_target_len=4, max_skip_fraction=1.0)  # a deliberately tight limit
    with caplog.at_level(logging.INFO, logger="attend.data"):
        ready(dm)
    assert dm.dropped == too_long and f"dropped {too_long} training captions" in caplog.text
    train = dm.datasets["train"]
    assert len(train) == 40 - too_long and int(train.captions.lengths.max()) <= 4
    assert len(dm.datasets["val"]) == len(dm.datasets["test"]) == 8  # evaluation keeps every image


# plots ------------------------------------------------------------------------------------------
def test_image_attention_figure(tmp_path: Path) -> None:
    words = ["a", "red", "circle", "</s>"]
    weights = np.random.default_rng(0).random((len(words), 4, 4)).astype(np.float32)
    weights /= weights.sum(axis=(1, 2), keepdims=True)
    image = np.full((SIZE, SIZE, 3), 255, dtype=np.uint8)
    image[8:24, 8:24] = (220, 30, 30)
    fig = image_attention(weights, image, words, title="t")
    try:
        assert isinstance(fig, Figure)
        with_images = [ax for ax in fig.axes if ax.images]
        assert len(with_images) >= len(words) + 1
        titles = [ax.get_title() for ax in with_images]
        assert titles[0] == "t" and all(any(t.startswith(w) for t in titles[1:]) for w in words)
        out = tmp_path / "attention.png"
        fig.savefig(out)
        assert out.stat().st_size > 0 and Image.open(out).format == "PNG"
    finally:
        close_figure(fig)
