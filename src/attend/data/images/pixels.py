"""Images for captioning: read once, padded square, resized and kept as uint8 rows of the example store (with
object masks where the source has them), memory-mapped by every loader worker; v2 transforms per step."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torchvision.transforms import v2

from attend.data.images.record import ImageCaption
from attend.data.store import ExampleStore

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CROP_SCALE, CROP_RATIO = (0.8, 1.0), (0.9, 1.1)  # the light random crop of training images (and stored crops)
MAX_CANVAS = 4096 * 4096  # pixels of the padded square beyond which an image is shrunk before it is padded


def square_resize(image: Image.Image, size: int, fill: int | tuple[int, ...] = (255, 255, 255),
                  resample=Image.Resampling.BICUBIC) -> Image.Image:
    """Pad to a square on ``fill`` (white; centred, nothing cut off), then resize to ``size`` x ``size``. An image
    whose square would be huge (a 142-byte PNG of 20000 x 1 pixels: 1.2 GB of canvas) is shrunk to ``size`` first."""
    width, height = image.size
    side = max(width, height)
    if side * side > MAX_CANVAS:
        width, height = max(1, round(width * size / side)), max(1, round(height * size / side))
        image, side = image.resize((width, height), resample), size
    if width != height:
        canvas = Image.new("L" if isinstance(fill, int) else "RGB", (side, side), fill)  # a mask, or pixels
        canvas.paste(image, ((side - width) // 2, (side - height) // 2))
        image = canvas
    return image.resize((size, size), resample) if side != size else image


def square_resize_mask(mask: Image.Image, size: int) -> Tensor:
    """(size, size) uint8 of an "L" mask letterboxed like the pixels: padding 0, each pixel its covered share."""
    resized = square_resize(mask, size, fill=0, resample=Image.Resampling.BOX)
    return torch.from_numpy(np.asarray(resized, dtype=np.uint8).copy())


def to_uint8_tensor(image: Image.Image) -> Tensor:
    """(3, H, W) uint8 from an RGB image."""
    return torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.uint8).copy()).permute(2, 0, 1)


def store_pixels(store: ExampleStore, row: int) -> Tensor:
    """(3, size, size) uint8 of one row of an image store, copied out of the mapped file (writable, own memory)."""
    size = store.meta["size"]
    return torch.from_numpy(store.buffer("pixels", row).copy()).view(3, size, size)


def store_mask(store: ExampleStore, row: int) -> Tensor | None:
    """(size, size) uint8 object mask of one row of an image store; None where its image has none."""
    mask = store.buffer("mask", row)
    size = store.meta["size"]
    return None if mask is None else torch.from_numpy(mask.copy()).view(size, size)


def read_mask(source, record: ImageCaption, size: int) -> Tensor | None:
    """(size, size) uint8 object mask of a record, None when its image has none."""
    mask = source.load_mask(record)
    return None if mask is None else square_resize_mask(mask, size)


def image_transform(train: bool, size: int, augment: bool = True, hflip: bool = False) -> v2.Compose:
    """uint8 (3, H, W) -> normalised float: a light random crop (and flip) when training, else as is."""
    steps: list = []
    if train and augment:
        steps.append(v2.RandomResizedCrop(size, scale=CROP_SCALE, ratio=CROP_RATIO, antialias=True))
    if train and hflip:
        steps.append(v2.RandomHorizontalFlip())
    steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    return v2.Compose(steps)


def denormalize(image: Tensor) -> np.ndarray:
    """Normalised (3, H, W) -> uint8 (H, W, 3): the image as a person sees it."""
    mean = torch.tensor(IMAGENET_MEAN, device=image.device).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=image.device).view(3, 1, 1)
    pixels = ((image.float() * std + mean).clamp(0, 1) * 255).round().to(torch.uint8)
    return pixels.permute(1, 2, 0).cpu().numpy()
