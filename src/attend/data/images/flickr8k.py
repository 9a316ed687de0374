"""Flickr8k in its original layout: a token file of five captions per image, split files, a folder of JPEGs."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from PIL import Image

from attend.data.bad_samples import BadSamples
from attend.data.images.record import CaptionDataError, ImageCaption, read_rgb
from attend.data.splitting import SPLITS

HOW_TO_GET = (
    "Flickr8k comes as Flickr8k_Dataset.zip (the images, folder Flicker8k_Dataset) and Flickr8k_text.zip "
    "(Flickr8k.token.txt and the Flickr_8k.{train,dev,test}Images.txt split files); unzip both into one folder "
    "and pass it as data.source.root=..."
)


class Flickr8k:
    """One record per image named in a split file, with its captions in #N order.

    A caption line that is not valid UTF-8 or whose caption is empty is a bad sample for ``bad_samples``
    (the data module's ``data.on_error`` policy): skipped, named by file and line, and counted under the
    split that lists its image; an image left without captions that way is left out.
    """

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
        self.bad_samples = BadSamples()  # the data module puts its own policy here

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
        token_lines = read_lines(self.path("captions"), "lines `IMAGE.jpg#N<TAB>caption`, five captions per image")
        images = self.path("images")
        if not images.is_dir():
            raise CaptionDataError(
                f"Flickr8k image folder {str(images)!r} does not exist: it should hold the JPEGs, e.g. "
                f"1000268201_693b08cb0e.jpg (pass data.source.images=... if yours is named otherwise). {HOW_TO_GET}"
            )
        listed = {split: read_split_file(self.path(split)) for split in ("train", "val", "test")}
        split_of = {name: split for split, lines in listed.items() for _, name in lines}
        captions, skipped_images = self.read_captions(token_lines, split_of)
        out = {}
        for split, lines in listed.items():
            records = []
            for line_no, name in lines:
                if name in captions:
                    records.append(ImageCaption(key=name, captions=captions[name], path=str(images / name)))
                elif name not in skipped_images:
                    raise CaptionDataError(
                        f"{self.path(split)}:{line_no}: image {name!r} has no captions in {self.path('captions')}; "
                        "remove it from the split file or use the token file that belongs to this split"
                    )
            out[split] = records
        return out

    def read_captions(
        self, token_lines: list[tuple[int, str | UnicodeDecodeError]], split_of: dict[str, str]
    ) -> tuple[dict[str, tuple[str, ...]], set[str]]:
        """Captions of the listed images in #N order, and the images whose captions were all skipped as bad."""
        path = self.path("captions")
        for split in SPLITS:
            self.bad_samples.begin(split, "lines")
        numbered: dict[str, list[tuple[int, str]]] = {}
        seen: Counter = Counter()  # caption lines per split, bad ones included
        touched: set[str] = set()  # images with a skipped caption line
        for line_no, line in token_lines:
            if isinstance(line, UnicodeDecodeError):
                name = line.object.split(b"#")[0].decode("utf-8", errors="replace").strip()
                if name in split_of:
                    seen[split_of[name]] += 1
                    touched.add(name)
                    problem = f"line {line_no} is not valid UTF-8 ({line.reason}); re-save the file as UTF-8"
                    self.bad_samples.skip(split_of[name], "lines", f"{path}:{line_no}", "invalid UTF-8", problem)
                continue
            name, number, caption = parse_token_line(path, line_no, line)
            if name not in split_of:
                continue
            seen[split_of[name]] += 1
            if caption:
                numbered.setdefault(name, []).append((number, caption))
            else:
                touched.add(name)
                problem = f"the caption of {name}#{number} on line {line_no} is empty"
                self.bad_samples.skip(split_of[name], "lines", f"{path}:{line_no}", "empty caption", problem)
        for split in SPLITS:
            self.bad_samples.end(split, "lines", seen[split], "captions")
        bad_images = {name for name in touched if name not in numbered}
        ordered = {name: tuple(c for _, c in sorted(caps, key=lambda nc: nc[0])) for name, caps in numbered.items()}
        return ordered, bad_images

    def load_image(self, record: ImageCaption) -> Image.Image:
        """The image as RGB; ImageReadError if its file is missing or corrupt."""
        return read_rgb(record.path)


def parse_token_line(path: Path, line_no: int, line: str) -> tuple[str, int, str]:
    """(image name, caption number, stripped caption) of an ``IMAGE.jpg#N<TAB>caption`` line."""
    ref, tab, caption = line.partition("\t")
    name, hash_, n = ref.rpartition("#")
    if not tab or not hash_ or not name:
        raise CaptionDataError(
            f"{path}:{line_no}: expected `IMAGE.jpg#N<TAB>caption` (a '#', a caption number and a tab), "
            f"got {line[:80]!r}; fix or delete this line"
        )
    if not n.strip().isdigit():
        raise CaptionDataError(f"{path}:{line_no}: caption number {n!r} after '#' is not a number; fix the line")
    return name.strip(), int(n), caption.strip()


def read_split_file(path: Path) -> list[tuple[int, str]]:
    """(line number, image name) of each non-blank line of a split file."""
    named = []
    for line_no, line in read_lines(path, "one image file name per line"):
        if isinstance(line, UnicodeDecodeError):
            raise CaptionDataError(f"{path}:{line_no}: not valid UTF-8 ({line.reason}); re-save the file as UTF-8")
        named.append((line_no, line.strip()))
    return named


def read_lines(path: Path, should_contain: str) -> list[tuple[int, str | UnicodeDecodeError]]:
    """(1-based line number, line without its end) of each non-blank line of a UTF-8 file, each line decoded
    on its own: one that is not valid UTF-8 is its UnicodeDecodeError, so the caller can name and skip it."""
    if not path.is_file():
        raise CaptionDataError(
            f"Flickr8k file {str(path)!r} does not exist: it should contain {should_contain}. {HOW_TO_GET}"
        )
    lines: list[tuple[int, str | UnicodeDecodeError]] = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8", errors="strict").rstrip("\r\n")
            except UnicodeDecodeError as e:
                lines.append((line_no, e))
                continue
            if line.strip():
                lines.append((line_no, line))
    return lines
