"""Flickr8k in its original layout: a token file of five captions per image, split files, a folder of JPEGs."""

from __future__ import annotations

import os
from pathlib import Path

from attend.data.bad_samples import Skipped, decode_line
from attend.data.images.record import CaptionDataError, ImageCaption, ImageFiles

HOW_TO_GET = (
    "Flickr8k comes as Flickr8k_Dataset.zip (the images, folder Flicker8k_Dataset) and Flickr8k_text.zip "
    "(Flickr8k.token.txt and the Flickr_8k.{train,dev,test}Images.txt split files); unzip both into one folder "
    "and pass it as data.source.root=..."
)


class Flickr8k(ImageFiles):
    """One record per image named in a split file, with its captions in #N order; a caption line that is not valid
    UTF-8 or is empty comes as a ``Skipped`` item (file:line) just before its image's record, or alone."""

    def __init__(self, root: str | os.PathLike, captions: str = "Flickr8k.token.txt", images: str = "Flicker8k_Dataset",
                 train: str = "Flickr_8k.trainImages.txt", val: str = "Flickr_8k.devImages.txt",
                 test: str = "Flickr_8k.testImages.txt") -> None:
        self.root = Path(root)
        self.files = {"captions": captions, "images": images, "train": train, "val": val, "test": test}

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"root": str(self.root), **self.files}

    def path(self, name: str) -> Path:
        """The file or folder of ``name`` ("captions", "images", "train", ...), under root if relative."""
        return self.root / self.files[name]  # an absolute file name replaces root

    def splits(self) -> dict[str, list[ImageCaption | Skipped]]:
        """{"train", "val", "test"} -> records in split-file order (an image whose file is missing is kept)."""
        if not self.root.is_dir():
            raise CaptionDataError(f"Flickr8k folder {str(self.root)!r} does not exist. {HOW_TO_GET}")
        token_lines = read_lines(self.path("captions"), "lines `IMAGE.jpg#N<TAB>caption`, five captions per image")
        images = self.path("images")
        if not images.is_dir():
            raise CaptionDataError(f"Flickr8k image folder {str(images)!r} does not exist: it should hold the JPEGs, "
                                   "e.g. 1000268201_693b08cb0e.jpg (pass data.source.images=... if yours is named "
                                   f"otherwise). {HOW_TO_GET}")
        listed = {split: read_split_file(self.path(split)) for split in ("train", "val", "test")}
        split_of = {name: split for split, lines in listed.items() for _, name in lines}
        captions, skipped = self.read_captions(token_lines, split_of)
        without_captions = set(skipped) - set(captions)  # every caption line of these was bad
        out: dict[str, list[ImageCaption | Skipped]] = {}
        for split, lines in listed.items():
            items: list[ImageCaption | Skipped] = []
            for line_no, name in lines:
                if split_of[name] == split:  # an image's bad lines go once, to the split that lists it last
                    items.extend(skipped.pop(name, ()))
                if name in captions:
                    items.append(ImageCaption(key=name, captions=captions[name], path=str(images / name)))
                elif name not in without_captions:
                    raise CaptionDataError(f"{self.path(split)}:{line_no}: image {name!r} has no captions in "
                                           f"{self.path('captions')}; remove it from the split file or use the token "
                                           "file that belongs to this split")
            out[split] = items
        return out

    def read_captions(self, token_lines: list[tuple[int, str | UnicodeDecodeError]], split_of: dict[str, str]
                      ) -> tuple[dict[str, tuple[str, ...]], dict[str, list[Skipped]]]:
        """Captions of the listed images in #N order, and their bad caption lines (others ignored) as Skipped."""
        path = self.path("captions")
        numbered: dict[str, list[tuple[int, str]]] = {}
        skipped: dict[str, list[Skipped]] = {}
        for line_no, line in token_lines:
            if isinstance(line, UnicodeDecodeError):
                name = line.object.split(b"#")[0].decode("utf-8", errors="replace").strip()
                if name in split_of:
                    problem = f"line {line_no} is not valid UTF-8 ({line.reason}); re-save the file as UTF-8"
                    skipped.setdefault(name, []).append(Skipped(f"{path}:{line_no}", "invalid UTF-8", problem))
                continue
            name, number, caption = parse_token_line(path, line_no, line)
            if name not in split_of:
                continue
            if caption:
                numbered.setdefault(name, []).append((number, caption))
            else:
                problem = f"the caption of {name}#{number} on line {line_no} is empty"
                skipped.setdefault(name, []).append(Skipped(f"{path}:{line_no}", "empty caption", problem))
        ordered = {name: tuple(c for _, c in sorted(caps, key=lambda nc: nc[0])) for name, caps in numbered.items()}
        return ordered, skipped


def parse_token_line(path: Path, line_no: int, line: str) -> tuple[str, int, str]:
    """(image name, caption number, stripped caption) of an ``IMAGE.jpg#N<TAB>caption`` line."""
    ref, tab, caption = line.partition("\t")
    name, hash_, n = ref.rpartition("#")
    if not tab or not hash_ or not name:
        raise CaptionDataError(f"{path}:{line_no}: expected `IMAGE.jpg#N<TAB>caption` (a '#', a caption number and a "
                               f"tab), got {line[:80]!r}; fix or delete this line")
    if not n.strip().isdigit():
        raise CaptionDataError(f"{path}:{line_no}: caption number {n!r} after '#' is not a number; fix the line")
    return name.strip(), int(n), caption.strip()


def read_split_file(path: Path) -> list[tuple[int, str]]:
    """(line number, image name) of each non-blank line of a split file."""
    lines = read_lines(path, "one image file name per line")
    for line_no, line in lines:
        if isinstance(line, UnicodeDecodeError):
            raise CaptionDataError(f"{path}:{line_no}: not valid UTF-8 ({line.reason}); re-save the file as UTF-8")
    return [(line_no, line.strip()) for line_no, line in lines]


def read_lines(path: Path, should_contain: str) -> list[tuple[int, str | UnicodeDecodeError]]:
    """(line number, ``decode_line``) of each non-blank line of a file."""
    if not path.is_file():
        raise CaptionDataError(f"Flickr8k file {str(path)!r} does not exist: it should contain {should_contain}. "
                               f"{HOW_TO_GET}")
    with open(path, "rb") as f:
        lines = [(line_no, decode_line(raw, line_no)) for line_no, raw in enumerate(f, 1)]
    return [(line_no, line) for line_no, line in lines if isinstance(line, UnicodeDecodeError) or line.strip()]
