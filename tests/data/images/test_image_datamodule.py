"""The image plug-in through the data module: image batches, the encoded store of pixels, unreadable images,
checkpoint state, readable sources, transforms."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

from attend.data import DataModule, ImageModality, WordTokenizer
from attend.data.images import Flickr8k, ImageCaption, ImageReadError, KarpathyJSON, ShapeScenes, read_rgb
from attend.data.images.pixels import denormalize, image_transform, square_resize, store_pixels, to_uint8_tensor
from attend.plots import close_figure, image_attention
from tests.helpers.images import (
    DOGS,
    FLICKR8K,
    GIRL,
    RAINBOW,
    SIZE,
    FileSource,
    datamodule,
    image_file,
    ready,
    record,
    stored_keys,
    stored_pixels,
)
from tests.helpers.paths import FIXTURES

KARPATHY = FIXTURES / "karpathy"
SPLITS = ("train", "val", "test")


def shapes(n_train: int = 40, n_val: int = 8, n_test: int = 8) -> ShapeScenes:
    return ShapeScenes(n_train=n_train, n_val=n_val, n_test=n_test, image_size=SIZE)


def all_batches(loader) -> list[dict]:
    return list(iter(loader))


def cached_image(dm: DataModule, split: str, index: int) -> np.ndarray:
    """The stored uint8 pixels (H, W, 3) of the record at ``index`` of its split (a batch's ``ids``)."""
    records, encoded = dm.records[split], dm.encoded[split]
    (row,) = [r for r in range(len(encoded)) if records.value("index", int(encoded.value("row", r))) == index]
    return store_pixels(encoded, row).permute(1, 2, 0).numpy()


def targets(dm: DataModule, split: str) -> list[list[int]]:
    dataset = dm.datasets[split]
    return [dataset[i]["tgt"] for i in range(len(dataset))]


def encoded_stores(cache_dir: Path) -> list[Path]:
    """The finished encoded stores (the pixels) under a cache folder."""
    return sorted(path.parent for path in (cache_dir / "store").glob("encoded-*/manifest.json"))


def close_to(a: np.ndarray, b: np.ndarray, tolerance: int = 1) -> bool:
    return a.shape == b.shape and int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()) <= tolerance


@pytest.fixture(scope="module")
def shapes_dm(tmp_path_factory: pytest.TempPathFactory) -> DataModule:
    """A set-up datamodule over 40/8/8 shape scenes; tests must not change it."""
    return ready(datamodule(shapes(), tmp_path_factory.mktemp("cache")))


def file_splits(folder: Path, corrupt: bool = False) -> dict[str, list[ImageCaption]]:
    """Ten training images of odd shapes and colours (wide, tall, noise, transparent), one each for val and test;
    with ``corrupt``, a garbage file among the training images."""
    folder.mkdir(exist_ok=True)
    train = []
    for i in range(10):
        size = (20 + 3 * i, 12 + 2 * (i % 4))  # wide and tall ones, never square at 32
        path = image_file(folder, f"t{i}.png", (25 * i, 200 - 15 * i, 90), size=size[::-1] if i % 3 else size)
        train.append(record(path, f"box number {i}"))
    Image.effect_noise((25, 25), 80).convert("RGB").save(folder / "noise.png")
    stamp = Image.new("RGBA", (18, 10), (0, 0, 0, 0))
    stamp.paste((200, 0, 0, 255), (2, 1, 8, 9))
    stamp.save(folder / "stamp.png")
    train[2] = record(str(folder / "noise.png"), "noise")
    train[7] = record(str(folder / "stamp.png"), "a red stamp")
    if corrupt:
        train[5] = record(image_file(folder, "corrupt.jpg", None), "a broken box")
    return {
        "train": train,
        "val": [record(image_file(folder, "val.png", (1, 2, 3)), "a box")],
        "test": [record(image_file(folder, "test.png", (3, 2, 1)), "a box")],
    }


def expected_pixels(item: ImageCaption) -> torch.Tensor:
    """(3, SIZE, SIZE) uint8 as an image file is kept: read, letterboxed on white, resized."""
    return to_uint8_tensor(square_resize(read_rgb(item.path), SIZE))


# batches ----------------------------------------------------------------------------------------
def test_shapes_train_batch_layout(shapes_dm: DataModule) -> None:
    dm, tok = shapes_dm, shapes_dm.tokenizer
    batch = next(iter(dm.train_dataloader()))
    B = 8
    assert batch["src"].shape == (B, 3, SIZE, SIZE) and batch["src"].dtype == torch.float32
    assert "src_lengths" not in batch
    assert batch["tgt"].shape[0] == B and batch["tgt_lengths"].max() == batch["tgt"].shape[1]
    assert batch["num_target_tokens"] == int((batch["tgt_lengths"] - 1).sum())
    assert isinstance(batch["references"], list) and len(batch["references"]) == B
    assert isinstance(batch["objects"], list) and len(batch["objects"]) == B
    assert "unseen" not in batch and "object_masks" not in batch  # evaluation only; shapes have no masks
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


def test_shapes_eval_batches_one_example_per_image(shapes_dm: DataModule) -> None:
    records = {r.key: r for split in ("val", "test") for r in shapes(40, 8, 8).splits()[split]}
    for loader in (shapes_dm.val_dataloader(), shapes_dm.test_dataloader()):
        batches = all_batches(loader)
        sources = [s for b in batches for s in b["sources"]]
        assert len(sources) == len(set(sources)) == 8
        for batch in batches:
            assert batch["src"].shape[1:] == (3, SIZE, SIZE) and batch["unseen"].dtype == torch.bool
            for source, references in zip(batch["sources"], batch["references"], strict=True):
                assert references == list(records[source].captions)


def test_model_facing_interface(shapes_dm: DataModule) -> None:
    assert shapes_dm.tokenizers() == {"target": shapes_dm.tokenizer}
    assert shapes_dm.encoder_kwargs() == {}
    assert shapes_dm.modality == "image" and ImageModality.name == "image"


def test_stored_pixels_are_the_letterboxed_images(tmp_path: Path, shapes_dm: DataModule) -> None:
    source = shapes()
    for split in ("val", "test"):  # rendered scenes
        expected = [to_uint8_tensor(square_resize(source.load_image(r), SIZE)) for r in source.splits()[split]]
        assert torch.equal(stored_pixels(shapes_dm, split), torch.stack(expected))
    splits = file_splits(tmp_path / "images")  # files: wide, tall, noise, transparent
    dm = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache"))
    assert torch.equal(stored_pixels(dm, "train"), torch.stack([expected_pixels(r) for r in splits["train"]]))
    train = dm.datasets["train"]
    assert not [name for name, value in vars(train).items() if isinstance(value, torch.Tensor)]  # no pixels in RAM
    expected = image_transform(False, SIZE)(expected_pixels(splits["val"][0]))
    assert torch.equal(dm.datasets["val"][0]["src"], expected)
    assert torch.equal(next(iter(dm.val_dataloader()))["src"][0], expected)


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


# the encoded store of pixels ----------------------------------------------------------------------
class CountingShapes(ShapeScenes):
    """Shape scenes that count rendered images (same class name for every instance: same store key)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.loads = 0

    def load_image(self, record: ImageCaption) -> Image.Image:
        self.loads += 1
        return super().load_image(record)


def test_the_pixel_store_is_reused_and_keyed_by_size(tmp_path: Path) -> None:
    settings = {"n_train": 12, "n_val": 3, "n_test": 2, "image_size": SIZE}
    first = CountingShapes(**settings)
    dm = datamodule(first, tmp_path)
    dm.prepare_data()
    assert len(encoded_stores(tmp_path)) == 3 and first.loads == 12 + 3 + 2  # one store per split
    dm.setup("fit")
    assert first.loads == 17  # setup opens the stores

    second = CountingShapes(**settings)
    again = ready(datamodule(second, tmp_path))
    assert second.loads == 0  # no image read again
    for split in SPLITS:
        assert torch.equal(stored_pixels(again, split), stored_pixels(dm, split))
        assert stored_keys(again, split) == stored_keys(dm, split)

    third = CountingShapes(**settings)
    small = ready(datamodule(third, tmp_path, image_size=16))
    assert third.loads == 17 and stored_pixels(small, "val").shape == (3, 3, 16, 16)
    assert small.records["val"].folder == dm.records["val"].folder  # the records do not depend on the size
    assert len(encoded_stores(tmp_path)) == 6
    assert not list((tmp_path / "store").glob("*/.*.tmp"))


def test_parallel_preparation_gives_the_same_store(tmp_path: Path) -> None:
    splits = file_splits(tmp_path / "images", corrupt=True)
    options = {"shard_size": 2, "max_skip_fraction": 0.5}  # shards of two images: five of them
    serial = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "serial", prepare_workers=0, **options))
    parallel = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "parallel", prepare_workers=2, **options))
    assert parallel.prepare_workers == 2 and len(parallel.encoded["train"].manifest["shards"]) == 5
    assert stored_keys(parallel, "train") == stored_keys(serial, "train") and "corrupt.jpg" not in stored_keys(
        parallel, "train")
    assert torch.equal(stored_pixels(parallel, "train"), stored_pixels(serial, "train"))
    assert parallel.encoded["train"].skipped == serial.encoded["train"].skipped
    assert targets(parallel, "train") == targets(serial, "train")


def test_loader_workers_and_pickles_read_the_store(tmp_path: Path) -> None:
    splits = file_splits(tmp_path / "images")
    in_process = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache"))
    with_workers = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache", num_workers=1))
    for got, want in zip(with_workers.val_dataloader(), in_process.val_dataloader(), strict=True):
        assert torch.equal(got["src"], want["src"]) and got["sources"] == want["sources"]
        assert torch.equal(got["tgt"], want["tgt"])
    dataset = in_process.datasets["train"]
    data = pickle.dumps(dataset)
    assert len(data) < 3 * SIZE * SIZE * len(dataset) // 2  # the stores travel by their folders, not their pixels
    copy = pickle.loads(data)
    for index in range(len(dataset)):
        assert torch.equal(copy[index]["src"], dataset[index]["src"]) and copy[index]["tgt"] == dataset[index]["tgt"]


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
    assert "skipped 2 of 4 images of the train split" in caplog.text
    assert dm.bad_samples.reasons("train") == {"missing file": 1, "corrupt image": 1}
    ((key, reason, problem),) = [skip for skip in dm.encoded["train"].skipped if skip[1] == "missing file"]
    assert key == missing and "does not exist" in problem
    assert stored_keys(dm, "train") == ["red.png", "blue.png"] and stored_keys(dm, "val") == ["green.png"]
    # the kept pixels stay aligned with their records
    assert tuple(cached_image(dm, "train", 0)[16, 16]) == (220, 30, 30)
    assert tuple(cached_image(dm, "train", 3)[16, 16]) == (30, 70, 220)
    train = dm.datasets["train"]
    assert [train[i]["source"] for i in range(len(train))] == ["red.png", "blue.png"]
    assert dm.tokenizer.decode(train[1]["tgt"]) == "a blue box" and train[1]["id"] == 3


def test_split_without_a_readable_image_raises_on_every_start(tmp_path: Path) -> None:
    good = image_file(tmp_path, "good.png", (0, 0, 0))
    splits = {
        "train": [record(good)],
        "val": [record(str(tmp_path / "gone.jpg")), record(image_file(tmp_path, "bad.jpg", None))],
        "test": [record(good)],
    }
    for _ in range(2):  # prepared, then found in the cache
        dm = datamodule(FileSource(tmp_path, splits), tmp_path / "cache", max_skip_fraction=1.0)
        with pytest.raises(ImageReadError, match="none of the 2 images of the val split"):
            ready(dm)


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


def test_augmentation_applies_to_training_examples_only(tmp_path: Path) -> None:
    dm = ready(datamodule(shapes(n_train=4, n_val=2, n_test=2), tmp_path, augment=True, hflip=True))
    train, val = dm.datasets["train"], dm.datasets["val"]
    torch.manual_seed(0)
    assert any(not torch.equal(train[0]["src"], train[0]["src"]) for _ in range(5))  # a fresh crop each time
    assert torch.equal(val[0]["src"], val[0]["src"])
    assert torch.equal(val[0]["src"], image_transform(False, SIZE)(store_pixels(dm.encoded["val"], 0)))


def test_readable_source_gives_the_cached_pixels(shapes_dm: DataModule) -> None:
    for split, loader in (("train", shapes_dm.train_dataloader()), ("val", shapes_dm.val_dataloader())):
        batch = next(iter(loader))
        for row in range(len(batch["sources"])):
            image = shapes_dm.readable_source(batch, row)
            assert image.shape == (SIZE, SIZE, 3) and image.dtype == np.uint8
            assert close_to(image, cached_image(shapes_dm, split, int(batch["ids"][row])))


def test_batch_from_sources(shapes_dm: DataModule, tmp_path: Path) -> None:
    path = image_file(tmp_path, "wide.png", (220, 30, 30), size=(40, 20))
    batch = shapes_dm.batch_from_sources([path])
    tok = shapes_dm.tokenizer
    assert batch["src"].shape == (1, 3, SIZE, SIZE) and batch["sources"] == [path]
    assert batch["tgt"].tolist() == [[tok.bos_id, tok.eos_id]] and "src_lengths" not in batch
    assert batch["references"] == [[]]
    expected = to_uint8_tensor(square_resize(read_rgb(path), SIZE)).permute(1, 2, 0).numpy()
    assert close_to(shapes_dm.readable_source(batch, 0), expected)
    with pytest.raises(ImageReadError, match=r"nope\.png"):
        shapes_dm.batch_from_sources([path, str(tmp_path / "nope.png")])


# checkpoint state -------------------------------------------------------------------------------
def test_state_dict_holds_only_the_tokenizer(shapes_dm: DataModule) -> None:
    state = shapes_dm.state_dict()
    assert set(state) == {"tgt_tokenizer"} and state["tgt_tokenizer"] == shapes_dm.tokenizer.state_dict()
    assert datamodule(shapes(), None).state_dict() == {}  # nothing fitted yet


def test_loaded_vocabulary_is_used_before_setup(shapes_dm: DataModule, tmp_path: Path) -> None:
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
    assert targets(dm, "train") == [shapes_dm.tokenizer.encode(r.captions[0]) for r in source.splits()["train"]]


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
    for split in SPLITS:
        assert targets(dm, split) == [other.encode(r.captions[0]) for r in splits[split]]
    batch = next(iter(dm.train_dataloader()))
    for row, references in enumerate(batch["references"]):
        assert other.decode(batch["tgt"][row]) == references[0]


# length filter ----------------------------------------------------------------------------------
def test_long_training_captions_are_dropped_one_caption_at_a_time(tmp_path: Path, caplog) -> None:
    dm = datamodule(Flickr8k(FLICKR8K), tmp_path, max_target_len=11, max_skip_fraction=1.0)
    with caplog.at_level(logging.INFO, logger="attend.data"):
        ready(dm)
    (girl,) = Flickr8k(FLICKR8K).splits()["train"]
    kept = [c for c in girl.captions if len(dm.tokenizer.encode(c)) <= 11]
    assert 0 < len(kept) < 5  # the image stays, with its short captions
    assert dm.dropped == 5 - len(kept) and f"skipped {5 - len(kept)} of 5 captions of the train split" in caplog.text
    assert sorted(targets(dm, "train")) == sorted(dm.tokenizer.encode(c) for c in kept)
    assert len(dm.datasets["val"]) == len(dm.datasets["test"]) == 1  # evaluation keeps every image


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
