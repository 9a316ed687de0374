"""What every image-caption source yields: records, the errors they raise, and reading an image file as RGB."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from attend.data.bad_samples import DataError


@dataclass(frozen=True)
class SceneObject:
    """One object of a synthetic scene: the caption word naming it and where it is."""

    kind: str  # the caption word that names it, e.g. "circle"
    box: tuple[float, float, float, float]  # (x0, y0, x1, y1) as fractions of image width/height, 0..1
    word_index: int  # index of that word in captions[0].split()


@dataclass(frozen=True)
class ImageCaption:
    """One image and its reference captions."""

    key: str  # unique, stable id within the data set
    captions: tuple[str, ...]  # one or more stripped, non-empty reference captions
    path: str | None = None  # image file, when the image comes from a file
    objects: tuple[SceneObject, ...] = ()  # only synthetic scenes fill it, in caption order


class ImageReadError(DataError):
    """An image file is missing or cannot be decoded; the message names the file."""


class CaptionDataError(DataError):
    """A caption data set file is missing or malformed; the message names the file, the line and the fix."""


class ImageFiles:
    """A source whose records name their image files: ``load_image`` reads one as RGB (transparent parts white),
    ImageReadError if it is missing or corrupt."""

    def load_image(self, record: ImageCaption) -> Image.Image:
        return read_rgb(record.path)


def read_rgb(path: str | os.PathLike) -> Image.Image:
    """Open an image file as RGB; RGBA/LA/P-with-transparency are composited on white."""
    return _read(path, to_rgb)


def read_alpha(path: str | os.PathLike) -> Image.Image | None:
    """The alpha channel of an image file as an "L" image (the object mask of a stamp), None when the file
    has no transparency or its alpha is the same everywhere (an opaque picture: no object outline)."""
    alpha = _read(path, lambda img: img.convert("RGBA").getchannel("A") if _transparent(img) else None)
    return None if alpha is None or len(set(alpha.getextrema())) == 1 else alpha


def _read(path: str | os.PathLike, convert: Callable[[Image.Image], Any]) -> Any:
    """``convert`` of the decoded image file; ImageReadError when it is missing or cannot be read."""
    if not os.path.isfile(path):  # False, not an error, for a name too long or holding NUL
        raise ImageReadError(f"image file {str(path)!r} does not exist")
    try:
        with Image.open(path) as img:
            img.load()  # decode everything here so truncated files fail inside the try
            return convert(img)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageReadError(f"image file {str(path)!r} cannot be read: {e}") from e


def _transparent(img: Image.Image) -> bool:
    return "A" in img.getbands() or "transparency" in img.info


def to_rgb(img: Image.Image) -> Image.Image:
    """An RGB copy of ``img``, transparent parts composited on white."""
    if _transparent(img):
        rgba = img.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    return img.convert("RGB")
