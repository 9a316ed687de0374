"""Images for captioning: read once, padded square, resized and cached as uint8; v2 transforms per step."""

from __future__ import annotations

import logging

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torchvision.transforms import v2

from attend.data.bad_samples import BadSamples
from attend.data.cache import cache_file, cached_skips, read_each, replay_skips, save_atomic
from attend.data.images import ImageCaption, ImageReadError

log = logging.getLogger("attend.data")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def square_resize(image: Image.Image, size: int) -> Image.Image:
    """Pad to a square on white (centred, nothing cut off), then resize to ``size`` x ``size``."""
    width, height = image.size
    side = max(width, height)
    if width != height:
        canvas = Image.new("RGB", (side, side), (255, 255, 255))
        canvas.paste(image, ((side - width) // 2, (side - height) // 2))
        image = canvas
    return image.resize((size, size), Image.Resampling.BICUBIC) if side != size else image


def to_uint8_tensor(image: Image.Image) -> Tensor:
    """(3, H, W) uint8 from an RGB image."""
    return torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.uint8).copy()).permute(2, 0, 1)


def load_pixels(
    source,
    records: list[ImageCaption],
    size: int,
    cache_dir: str | None,
    bad_samples: BadSamples | None = None,
    split: str = "data",
) -> tuple[Tensor, list[int]]:
    """(N, 3, size, size) uint8 of the records whose image could be read, and their indices.

    Unreadable images (missing, corrupt) go to ``bad_samples``: skipped, named in a warning and
    counted (or DataError with on_error=raise). With ``cache_dir`` the result and its skips are saved
    under ``cache_dir/images`` keyed by the source's settings, the size and the records; a cached read
    reports the same skips again.
    """
    if not records:  # an empty split (n_test=0): nothing to read
        return torch.empty((0, 3, size, size), dtype=torch.uint8), []
    path = None
    if cache_dir is not None:
        path = cache_file(cache_dir, "images", source, size, [r.key for r in records], label=f"{size}px")
        if path.is_file():
            cached = torch.load(path, weights_only=True)
            replay_skips(bad_samples, split, cached_skips(cached, records), len(records), "image")
            return cached["pixels"], cached["kept"]
    read = lambda record: to_uint8_tensor(square_resize(source.load_image(record), size))
    pixels, kept, skipped = read_each(
        records, read, ImageReadError, "image", bad_samples, split, corrupt="corrupt image"
    )
    stacked = torch.stack(pixels)  # (N, 3, size, size)
    if path is not None:
        save_atomic({"pixels": stacked, "kept": kept, "skipped": skipped}, path)
    return stacked, kept


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
