"""Image-caption data for tests: the Flickr8k fixture, image files written here, a source over them and the
image data module with what its store holds."""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image

from attend.data import DataModule, WordTokenizer
from attend.data.images import ImageCaption, read_rgb
from attend.data.images.pixels import store_pixels
from tests.helpers.datamodules import caption_datamodule
from tests.helpers.paths import FIXTURES

FLICKR8K = FIXTURES / "flickr8k"
GIRL, DOGS, RAINBOW = "1000268201_693b08cb0e.jpg", "1001773457_577c3a7d70.jpg", "1002674143_1b742ab4b8.jpg"
SIZE = 32


def datamodule(source, cache_dir: Path | None, **options) -> DataModule:
    """The image data module over ``source``: SIZE pixels, batches of 8."""
    settings = {"image_size": SIZE, "batch_size": 8, "eval_batch_size": 8, "cache_dir": cache_dir, **options}
    return caption_datamodule(source, WordTokenizer(lowercase=True), **settings)


def ready(dm: DataModule) -> DataModule:
    """``dm`` prepared and set up for training."""
    dm.prepare_data()
    dm.setup("fit")
    return dm


def stored_keys(dm: DataModule, split: str) -> list[str]:
    """The keys of the images the split's encoded store holds, in store order (unreadable ones left out)."""
    records = dm.records[split]
    return [records.value("key", int(row)) for row in dm.encoded[split].column("row")]


def stored_pixels(dm: DataModule, split: str) -> torch.Tensor:
    """(N, 3, H, W) uint8: every stored image of a split, for comparing two runs."""
    encoded = dm.encoded[split]
    return torch.stack([store_pixels(encoded, row) for row in range(len(encoded))])


class FileSource:
    """A tiny source of image files: given splits, images read with read_rgb. Its settings name every record (a
    source's settings key its records store), so other splits are other records."""

    def __init__(self, root: Path, splits: dict[str, list[ImageCaption]]) -> None:
        self.root = root
        self._splits = splits

    def settings(self) -> dict:
        records = {split: [[r.key, r.path, list(r.captions)] for r in items] for split, items in self._splits.items()}
        return {"root": str(self.root), "records": records}

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
    """The record of an image file with these captions (one if none are given)."""
    return ImageCaption(key=Path(path).name, captions=captions or ("a picture",), path=path)
