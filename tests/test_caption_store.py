"""Caption images in the example store: exact pixels, reuse without reading, repair of damaged files, resumed
preparation, replayed skips, parallel preparation and loader workers."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import pytest
import torch
from PIL import Image

from attend.data.bad_samples import DataError
from attend.data.images import ImageCaption, ImageReadError, ShapeScenes, read_rgb
from attend.data.images import pixels as pixels_module
from attend.data.images.pixels import (
    image_store,
    image_transform,
    square_resize,
    store_pixels,
    to_uint8_tensor,
)
from attend.data.store import ExampleStore
from tests.test_caption_datamodule import SIZE, FileSource, datamodule, image_file, ready, record

SHARD = 4  # images a shard in these tests, so ten images make three shards


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pixels_module, "SHARD_IMAGES", SHARD)


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
    """(3, SIZE, SIZE) uint8 as the pixels were computed before the store: read, letterboxed, resized."""
    return to_uint8_tensor(square_resize(read_rgb(item.path), SIZE))


def all_pixels(store: ExampleStore) -> list[bytes]:
    return [bytes(store.buffer("pixels", row)) for row in range(len(store))]


def failing_source(root: Path, splits: dict[str, list[ImageCaption]]) -> FileSource:
    """A FileSource (same class and settings: same store key) that must not be read: any image read fails."""
    source = FileSource(root, splits)

    def load_image(record: ImageCaption) -> Image.Image:
        raise AssertionError(f"read {record.key} again although the store is finished")

    source.load_image = load_image
    return source


def shard_files(store: ExampleStore) -> list[Path]:
    return sorted(store.folder.glob("shard-*.arrow"))


# what the store holds ---------------------------------------------------------------------------
def test_stored_pixels_equal_the_letterboxed_image(tmp_path: Path, small_shards: None) -> None:
    splits = file_splits(tmp_path / "images")
    records = splits["train"]
    store = image_store(FileSource(tmp_path, splits), records, SIZE, tmp_path / "store")
    assert len(store) == 10 and len(shard_files(store)) == 3
    assert store.column("index").tolist() == list(range(10)) and store.column_names == ["index", "pixels"]
    for row, item in enumerate(records):
        assert len(store.buffer("pixels", row)) == 3 * SIZE * SIZE
        assert torch.equal(store_pixels(store, row), expected_pixels(item))

    dm = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache"))
    train, val = dm.datasets["train"], dm.datasets["val"]
    assert not [name for name, value in vars(train).items() if isinstance(value, torch.Tensor)]  # no pixels in RAM
    by_key = {item.key: item for item in records}
    for index in range(len(train)):
        assert torch.equal(train.pixels(index), expected_pixels(by_key[train.keys[index]]))
    expected = image_transform(False, SIZE)(expected_pixels(splits["val"][0]))
    assert torch.equal(next(iter(dm.val_dataloader()))["src"][0], expected)  # the batch is as before the store
    assert torch.equal(val[0]["image"], expected)


def test_shapes_store_matches_the_rendered_scenes(tmp_path: Path) -> None:
    source = ShapeScenes(n_train=6, n_val=2, n_test=2, image_size=SIZE)
    records = source.splits()["train"]
    store = image_store(source, records, SIZE, tmp_path / "store")
    for row, item in enumerate(records):
        assert torch.equal(store_pixels(store, row), to_uint8_tensor(square_resize(source.load_image(item), SIZE)))


def test_a_second_setup_reuses_the_store_without_reading_images(tmp_path: Path) -> None:
    splits = file_splits(tmp_path / "images")
    first = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache"))
    again = ready(datamodule(failing_source(tmp_path, splits), tmp_path / "cache"))
    for split in ("train", "val", "test"):
        a, b = first.datasets[split], again.datasets[split]
        assert a.keys == b.keys and all(torch.equal(a.pixels(i), b.pixels(i)) for i in range(len(a)))


# damaged and interrupted stores -----------------------------------------------------------------
def truncate_shard(store: ExampleStore) -> None:
    path = shard_files(store)[1]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def truncate_manifest(store: ExampleStore) -> None:
    path = store.folder / "manifest.json"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garble_manifest(store: ExampleStore) -> None:
    (store.folder / "manifest.json").write_bytes(b'{"shards": 17, "\x00\xff garbage')


@pytest.mark.parametrize("damage", [truncate_shard, truncate_manifest, garble_manifest])
def test_a_damaged_store_is_named_and_rebuilt(damage, tmp_path: Path, small_shards: None, caplog) -> None:
    splits = file_splits(tmp_path / "images")
    records = splits["train"]
    store = image_store(FileSource(tmp_path, splits), records, SIZE, tmp_path / "store")
    before = all_pixels(store)
    damage(store)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        rebuilt = image_store(FileSource(tmp_path, splits), records, SIZE, tmp_path / "store")
    assert "damaged" in caplog.text and str(store.folder) in caplog.text
    assert all_pixels(rebuilt) == before and rebuilt.column("index").tolist() == list(range(10))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = image_store(failing_source(tmp_path, splits), records, SIZE, tmp_path / "store")  # whole again
    assert "damaged" not in caplog.text and all_pixels(again) == before


class InterruptedSource(FileSource):
    """A source whose preparation dies (not a bad image: a crash) at the ``fail_at``-th image it reads."""

    def __init__(self, root: Path, splits: dict, fail_at: int) -> None:
        super().__init__(root, splits)
        self.fail_at = fail_at
        self.loads = 0

    def load_image(self, record: ImageCaption) -> Image.Image:
        self.loads += 1
        if self.loads == self.fail_at:
            raise RuntimeError("the machine went down")
        return super().load_image(record)


def test_an_interrupted_preparation_resumes(tmp_path: Path, small_shards: None) -> None:
    splits = file_splits(tmp_path / "images")
    records = splits["train"]
    folder = tmp_path / "store"
    with pytest.raises(RuntimeError, match="went down"):
        image_store(InterruptedSource(tmp_path, splits, fail_at=SHARD + 2), records, SIZE, folder)
    first = folder / "shard-00000.arrow"
    assert first.is_file() and not (folder / "manifest.json").exists() and not list(folder.glob("shard-00001*"))
    written = first.stat()

    resumed = InterruptedSource(tmp_path, splits, fail_at=-1)
    store = image_store(resumed, records, SIZE, folder)
    assert resumed.loads == len(records) - SHARD  # the first shard's images are not read again
    assert (first.stat().st_ino, first.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    whole = image_store(FileSource(tmp_path, splits), records, SIZE, tmp_path / "whole")
    assert len(store) == 10 and all_pixels(store) == all_pixels(whole)


def test_parallel_preparation_gives_the_same_store(tmp_path: Path, small_shards: None) -> None:
    splits = file_splits(tmp_path / "images", corrupt=True)
    records = splits["train"]
    serial = image_store(FileSource(tmp_path, splits), records, SIZE, tmp_path / "serial", workers=0)
    parallel = image_store(FileSource(tmp_path, splits), records, SIZE, tmp_path / "parallel", workers=2)
    assert len(parallel) == 9 and parallel.column("index").tolist() == serial.column("index").tolist()
    assert all_pixels(parallel) == all_pixels(serial) and parallel.skipped == serial.skipped
    assert [f.read_bytes() for f in shard_files(parallel)] == [f.read_bytes() for f in shard_files(serial)]


# bad images ------------------------------------------------------------------------------------
def test_skips_are_replayed_on_a_cached_start(tmp_path: Path, caplog) -> None:
    splits = file_splits(tmp_path / "images", corrupt=True)
    first = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache", max_skip_fraction=0.5))
    assert first.skipped["train"] == 1 and first.bad_samples.reasons() == {"corrupt image": 1}
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = ready(datamodule(failing_source(tmp_path, splits), tmp_path / "cache", max_skip_fraction=0.5))
    assert "corrupt.jpg" in caplog.text and "skipped 1 of 10 images of the train split" in caplog.text
    assert again.skipped == first.skipped and again.bad_samples.reasons() == first.bad_samples.reasons()
    assert "corrupt.jpg" not in again.datasets["train"].keys and len(again.datasets["train"]) == 9
    kept = [r for r in splits["train"] if not r.key.startswith("corrupt")]
    train = again.datasets["train"]
    for index in range(len(train)):  # every store row stays aligned with its record
        assert torch.equal(train.pixels(index), expected_pixels(kept[index]))
    with pytest.raises(DataError, match=r"corrupt\.jpg.*corrupt image, train split"):
        ready(datamodule(failing_source(tmp_path, splits), tmp_path / "cache", on_error="raise"))


def test_a_missing_file_is_a_missing_file_skip(tmp_path: Path) -> None:
    splits = file_splits(tmp_path / "images")
    splits["train"][3] = record(str(tmp_path / "gone.png"))
    store = image_store(FileSource(tmp_path, splits), splits["train"], SIZE, tmp_path / "store")
    ((key, reason, problem),) = store.skipped
    assert key == str(tmp_path / "gone.png") and reason == "missing file" and "does not exist" in problem
    assert 3 not in store.column("index").tolist()


def test_no_readable_image_raises_on_every_start(tmp_path: Path) -> None:
    bad = [record(str(tmp_path / "gone.jpg")), record(image_file(tmp_path, "bad.jpg", None))]
    for _ in range(2):  # built, then opened
        with pytest.raises(ImageReadError, match="none of the 2 images of the val split"):
            image_store(FileSource(tmp_path, {}), bad, SIZE, tmp_path / "store", split="val")


# loader workers --------------------------------------------------------------------------------
def test_loader_workers_read_the_store(tmp_path: Path) -> None:
    splits = file_splits(tmp_path / "images")
    in_process = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache"))
    with_workers = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache", num_workers=1))
    for split in ("train", "val"):
        loader = with_workers.train_dataloader() if split == "train" else with_workers.val_dataloader()
        reference = in_process.train_dataloader() if split == "train" else in_process.val_dataloader()
        for got, want in zip(loader, reference, strict=True):
            assert torch.equal(got["src"], want["src"]) and got["sources"] == want["sources"]
            assert torch.equal(got["tgt"], want["tgt"])


def test_the_dataset_pickles_without_its_pixels(tmp_path: Path) -> None:
    splits = file_splits(tmp_path / "images")
    dm = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache"))
    dataset = dm.datasets["train"]
    data = pickle.dumps(dataset)
    assert len(data) < 3 * SIZE * SIZE * len(dataset) // 2  # the store travels by its folder, not its pixels
    copy = pickle.loads(data)
    for index in range(len(dataset)):
        assert torch.equal(copy.pixels(index), dataset.pixels(index))
        assert copy[index]["tgt"] == dataset[index]["tgt"]


def test_prepare_workers_reach_the_store(tmp_path: Path, small_shards: None) -> None:
    splits = file_splits(tmp_path / "images")
    dm = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache", prepare_workers=2))
    assert dm.prepare_workers == 2
    serial = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "serial", prepare_workers=0))
    a, b = dm.datasets["train"], serial.datasets["train"]
    assert a.keys == b.keys and all(torch.equal(a.pixels(i), b.pixels(i)) for i in range(len(a)))
