"""Images for captioning: read once, padded square, resized and cached as uint8 (with object masks where the
source has them); v2 transforms per step."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torchvision.transforms import v2

from attend.data.bad_samples import BadSamples
from attend.data.cache import cache_file, cached_skips, load_or_rebuild, read_each, replay_skips, save_atomic
from attend.data.images import ImageCaption, ImageReadError

log = logging.getLogger("attend.data")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def square_resize(
    image: Image.Image, size: int, fill: int | tuple[int, ...] = (255, 255, 255), resample=Image.Resampling.BICUBIC
) -> Image.Image:
    """Pad to a square on ``fill`` (white; centred, nothing cut off), then resize to ``size`` x ``size``."""
    width, height = image.size
    side = max(width, height)
    if width != height:
        canvas = Image.new("L" if isinstance(fill, int) else "RGB", (side, side), fill)  # a mask, or pixels
        canvas.paste(image, ((side - width) // 2, (side - height) // 2))
        image = canvas
    return image.resize((size, size), resample) if side != size else image


def square_resize_mask(mask: Image.Image, size: int) -> Tensor:
    """(size, size) uint8 of an "L" object mask letterboxed as ``square_resize`` does the pixels: the padding
    is background (0), and the box filter keeps each pixel's covered fraction (255: all object)."""
    resized = square_resize(mask, size, fill=0, resample=Image.Resampling.BOX)
    return torch.from_numpy(np.asarray(resized, dtype=np.uint8).copy())


def to_uint8_tensor(image: Image.Image) -> Tensor:
    """(3, H, W) uint8 from an RGB image."""
    return torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.uint8).copy()).permute(2, 0, 1)


class LoadedImages(NamedTuple):
    """A split's images as cached: the pixels, the indices of the records read, and their object masks."""

    pixels: Tensor  # (N, 3, size, size) uint8
    kept: list[int]  # index in the records of each of the N images
    masks: Tensor | None = None  # (N, size, size) uint8, 255 on the object; None: the source has no masks
    has_mask: Tensor | None = None  # (N,) bool: False where the image has no mask (opaque: its row of masks is 0)


def has_masks(source) -> bool:
    """Whether ``source`` gives object masks: a ``load_mask(record)`` -> "L" image or None (Tux Paint's alpha)."""
    return callable(getattr(source, "load_mask", None))


def load_pixels(
    source,
    records: list[ImageCaption],
    size: int,
    cache_dir: str | None,
    bad_samples: BadSamples | None = None,
    split: str = "data",
) -> LoadedImages:
    """(N, 3, size, size) uint8 of the records whose image could be read, their indices, and object masks
    letterboxed like the pixels when the source has them (``has_masks``).

    Unreadable images (missing, corrupt) go to ``bad_samples``: skipped, named in a warning and
    counted (or DataError with on_error=raise). With ``cache_dir`` the result and its skips are saved
    under ``cache_dir/images`` keyed by the source's settings, the size, the records and whether masks
    are kept (so caches from before masks are not read for a source with masks); a cached read
    reports the same skips again, and a truncated or corrupt cache file is rebuilt with a warning.
    """
    masked = has_masks(source)
    if not records:  # an empty split (n_test=0): nothing to read
        empty = torch.empty((0, size, size), dtype=torch.uint8) if masked else None
        return LoadedImages(torch.empty((0, 3, size, size), dtype=torch.uint8), [], empty,
                            torch.empty(0, dtype=torch.bool) if masked else None)
    path = None
    if cache_dir is not None:
        formats = ["object masks v1"] if masked else []
        path = cache_file(cache_dir, "images", source, size, [r.key for r in records], *formats, label=f"{size}px")

    def load(path: Path) -> tuple[LoadedImages, list] | None:
        cached = torch.load(path, weights_only=True)  # truncated or overwritten: it raises
        if masked and "has_mask" not in cached:
            return None  # a file from before masks: read the images again
        loaded = LoadedImages(cached["pixels"], cached["kept"], cached.get("masks"), cached.get("has_mask"))
        return loaded, cached_skips(cached, records)

    def build() -> tuple[LoadedImages, list]:
        read = lambda record: (
            to_uint8_tensor(square_resize(source.load_image(record), size)),
            read_mask(source, record, size) if masked else None,
        )
        images, kept, skipped = read_each(
            records, read, ImageReadError, "image", bad_samples, split, corrupt="corrupt image"
        )
        loaded = LoadedImages(torch.stack([pixels for pixels, _ in images]), kept)  # (N, 3, size, size)
        if masked:
            masks = [mask for _, mask in images]
            loaded = loaded._replace(
                masks=torch.stack([torch.zeros(size, size, dtype=torch.uint8) if m is None else m for m in masks]),
                has_mask=torch.tensor([m is not None for m in masks], dtype=torch.bool),
            )
        return loaded, skipped

    save = lambda built, path: save_atomic({**built[0]._asdict(), "skipped": built[1]}, path)
    replay = lambda cached: replay_skips(bad_samples, split, cached[1], len(records), "image")
    return load_or_rebuild(path, load, build, save, on_cached=replay)[0]


def read_mask(source, record: ImageCaption, size: int) -> Tensor | None:
    """(size, size) uint8 object mask of a record, None when its image has none."""
    mask = source.load_mask(record)
    return None if mask is None else square_resize_mask(mask, size)


def image_transform(train: bool, size: int, augment: bool = True, hflip: bool = False) -> v2.Compose:
    """uint8 (3, H, W) -> normalised float: a light random crop (and flip) when training, else as is."""
    steps: list = []
    if train and augment:
        steps.append(v2.RandomResizedCrop(size, scale=(0.8, 1.0), ratio=(0.9, 1.1), antialias=True))
    if train and hflip:
        steps.append(v2.RandomHorizontalFlip())
    steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    return v2.Compose(steps)


def denormalize(image: Tensor) -> np.ndarray:
    """Normalised (3, H, W) -> uint8 (H, W, 3) for plots."""
    mean = torch.tensor(IMAGENET_MEAN, device=image.device).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=image.device).view(3, 1, 1)
    pixels = ((image.float() * std + mean).clamp(0, 1) * 255).round().to(torch.uint8)
    return pixels.permute(1, 2, 0).cpu().numpy()
