"""Flickr8k in its original layout: a token file of five captions per image, split files, a folder of JPEGs."""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image

from attend.data.images.record import CaptionDataError, ImageCaption, read_rgb

HOW_TO_GET = (
    "Flickr8k comes as Flickr8k_Dataset.zip (the images, folder Flicker8k_Dataset) and Flickr8k_text.zip "
    "(Flickr8k.token.txt and the Flickr_8k.{train,dev,test}Images.txt split files); unzip both into one folder "
    "and pass it as data.source.root=..."
)


class Flickr8k:
    """One record per image named in a split file, with its captions in #N order."""

    def __init__(
        self,
        root: str | os.PathLike,
        captions: str = "Flickr8k.token.txt",
        images: str = "Flicker8k_Dataset",
        train: str = "Flickr_8k.trainImages.txt",
        val: str = "Flickr_8k.devImages.txt",
        test: str = "Flickr_8k.testImages.txt",
    ) -> None:
        self.root = Path(root)
        self.files = {"captions": captions, "images": images, "train": train, "val": val, "test": test}

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"root": str(self.root), **self.files}

    def path(self, name: str) -> Path:
        """The file or folder of ``name`` ("captions", "images", "train", ...), under root if relative."""
        return self.root / self.files[name]  # an absolute file name replaces root

    def splits(self) -> dict[str, list[ImageCaption]]:
        """{"train", "val", "test"} -> records; an image whose file is missing is kept (load_image fails on it)."""
        if not self.root.is_dir():
            raise CaptionDataError(f"Flickr8k folder {str(self.root)!r} does not exist. {HOW_TO_GET}")
        captions = read_token_file(self.path("captions"))
        images = self.path("images")
        if not images.is_dir():
            raise CaptionDataError(
                f"Flickr8k image folder {str(images)!r} does not exist: it should hold the JPEGs, e.g. "
                f"1000268201_693b08cb0e.jpg (pass data.source.images=... if yours is named otherwise). {HOW_TO_GET}"
            )
        out = {}
        for split in ("train", "val", "test"):
            split_file = self.path(split)
            records = []
            for line_no, name in read_split_file(split_file):
                if name not in captions:
                    raise CaptionDataError(
                        f"{split_file}:{line_no}: image {name!r} has no captions in {self.path('captions')}; "
                        "remove it from the split file or use the token file that belongs to this split"
                    )
                records.append(ImageCaption(key=name, captions=captions[name], path=str(images / name)))
            out[split] = records
        return out

    def load_image(self, record: ImageCaption) -> Image.Image:
        """The image as RGB; ImageReadError if its file is missing or corrupt."""
        return read_rgb(record.path)


def read_token_file(path: Path) -> dict[str, tuple[str, ...]]:
    """``IMAGE.jpg#N<TAB>caption`` lines -> image name -> captions in N order; blank lines are skipped."""
    numbered: dict[str, list[tuple[int, str]]] = {}
    for line_no, line in read_lines(path, "lines `IMAGE.jpg#N<TAB>caption`, five captions (N = 0..4) per image"):
        ref, tab, caption = line.partition("\t")
        name, hash_, n = ref.rpartition("#")
        if not tab or not hash_ or not name:
            raise CaptionDataError(
                f"{path}:{line_no}: expected `IMAGE.jpg#N<TAB>caption` (a '#', a caption number and a tab), "
                f"got {line[:80]!r}; fix or delete this line"
            )
        if not n.strip().isdigit():
            raise CaptionDataError(f"{path}:{line_no}: caption number {n!r} after '#' is not a number; fix the line")
        if caption.strip():
            numbered.setdefault(name.strip(), []).append((int(n), caption.strip()))
    return {name: tuple(c for _, c in sorted(caps, key=lambda nc: nc[0])) for name, caps in numbered.items()}


def read_split_file(path: Path) -> list[tuple[int, str]]:
    """(line number, image name) of each non-blank line of a split file."""
    return [(line_no, line.strip()) for line_no, line in read_lines(path, "one image file name per line")]


def read_lines(path: Path, should_contain: str) -> list[tuple[int, str]]:
    """(1-based line number, line without its end) of each non-blank line of a UTF-8 file."""
    if not path.is_file():
        raise CaptionDataError(
            f"Flickr8k file {str(path)!r} does not exist: it should contain {should_contain}. {HOW_TO_GET}"
        )
    try:
        with open(path, encoding="utf-8") as f:
            return [(i, line.rstrip("\r\n")) for i, line in enumerate(f, 1) if line.strip()]
    except UnicodeDecodeError as e:
        raise CaptionDataError(f"{path}: not UTF-8 ({e}); re-save it as UTF-8") from e
