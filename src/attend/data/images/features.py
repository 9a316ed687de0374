"""A frozen image encoder's features, computed once into the example store instead of at every training step.

A frozen backbone gives the same features for the same pixels, so running it on every batch of every epoch was
wasted work (most of a caption epoch). The random crop cannot be drawn afresh each step, so training images get
``crops`` fixed random crops (seeded per image) besides the full image, one picked at random each time an example
is read; validation and test use the full image only.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pyarrow as pa
import torch
from torch import Tensor
from torchvision.transforms import v2

from attend.data.images.pixels import CROP_RATIO, CROP_SCALE, image_transform, store_pixels
from attend.data.store import ExampleStore, Shard, prepared_store

FEATURE_SHARD_IMAGES = 128  # images a feature shard (7x7x1280 float16 is 125 KB an image and version)
EXTRACT_BATCH = 32  # images through the extractor at once


class FeatureExtractor(Protocol):
    """An encoder's frozen part: normalised (B, 3, H, W) -> (B, C, h, w); ``key`` (class, weights) names it."""

    key: str

    def __call__(self, images: Tensor) -> Tensor: ...


def normalise(pixels: Tensor) -> Tensor:
    """uint8 (B, 3, H, W) -> float ImageNet-normalised, as ``image_transform`` gives evaluation images."""
    return image_transform(train=False, size=pixels.shape[-1])(pixels)  # the one normalisation, batched


def crop_versions(pixels: Tensor, crops: int, seed: int) -> Tensor:
    """(1 + crops, 3, H, W) uint8: the image, then ``crops`` random crops resized back, seeded by ``seed``."""
    size = pixels.shape[-1]
    versions = [pixels]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        crop = v2.RandomResizedCrop(size, scale=CROP_SCALE, ratio=CROP_RATIO, antialias=True)
        versions += [crop(pixels) for _ in range(crops)]
    return torch.stack(versions)


def crop_key(crops: int) -> int | dict:
    """What decides a feature store's crops, for its key: their number, and with any, the crop's scale and ratio
    range (a changed range must not reuse crops drawn with the old one)."""
    return crops if crops == 0 else {"crops": crops, "scale": list(CROP_SCALE), "ratio": list(CROP_RATIO)}


def feature_store(images: ExampleStore, extractor: FeatureExtractor, crops: int, seed: int, folder,
                  describe: str) -> ExampleStore:
    """The features of every row of ``images`` (an image store), ``1 + crops`` versions each, prepared when
    missing. Row r holds ``features`` (float16 bytes of (versions, C, h, w)); ``meta`` holds the shape."""
    shape: dict[str, list[int]] = {}

    def prepare(rows: list[int], first: int) -> Shard:
        versions = torch.cat([crop_versions(store_pixels(images, row), crops, seed + row) for row in rows])
        with torch.inference_mode():  # (rows * V, C, h, w), a few images at a time
            features = torch.cat([extractor(normalise(part)) for part in versions.split(EXTRACT_BATCH)])
        features = features.to(torch.float16).view(len(rows), 1 + crops, *features.shape[1:])
        shape["versions"] = list(features.shape[1:])
        blobs = [row.contiguous().numpy().tobytes() for row in features]
        return Shard({"features": pa.array(blobs, type=pa.binary())})

    return prepared_store(folder, range(len(images)), prepare, FEATURE_SHARD_IMAGES, workers=0,  # torch uses the cores
                          meta=lambda: {"shape": shape.get("versions", [])}, describe=describe)


def stored_features(store: ExampleStore, row: int, version: int = 0) -> Tensor:
    """(C, h, w) float32 features of one version of a row of a feature store."""
    versions, *cell_shape = store.meta["shape"]
    flat = np.frombuffer(store.buffer("features", row), dtype=np.float16)
    size = flat.size // versions
    return torch.from_numpy(flat[version * size : (version + 1) * size].astype(np.float32)).view(*cell_shape)


def feature_versions(store: ExampleStore) -> int:
    """How many versions (the image and its crops) each row of a feature store holds."""
    return int(store.meta["shape"][0]) if store.meta.get("shape") else 1
