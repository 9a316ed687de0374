"""Tux Paint stamps: clip-art PNGs, each with a one-line English description in a sibling .txt file."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from PIL import Image

from attend.data.images.record import ImageCaption, ImageFiles, read_alpha
from attend.data.splitting import split_by_key

log = logging.getLogger("attend.data")

TUXPAINT_STAMPS = "/usr/share/tuxpaint/stamps"
TRANSLATION = re.compile(r"^[a-z]{2,3}(_[A-Z]{2})?(@\w+)?\.utf8=")  # "de.utf8=...": a translation, not English


class TuxPaintStamps(ImageFiles):
    """Stamps NAME.png captioned by the first non-empty line of NAME.txt; a fixed seeded split by image. A stamp's
    alpha channel outlines its object (``load_mask``; 782 of the 785 captioned default stamps have one)."""

    def __init__(self, root: str | os.PathLike = TUXPAINT_STAMPS, n_val: int = 100, n_test: int = 120,
                 seed: int = 1234) -> None:
        self.root = Path(root)
        self.n_val = n_val
        self.n_test = n_test
        self.seed = seed
        self.skipped = 0  # stamps without a caption, after splits()

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"root": str(self.root), "n_val": self.n_val, "n_test": self.n_test, "seed": self.seed}

    def splits(self) -> dict[str, list[ImageCaption]]:
        """{"train", "val", "test"} -> stamp records: exactly n_test test and n_val val images, the rest train."""
        return split_by_key(self.records(), self.n_val, self.n_test, self.seed, f"Tux Paint stamps in {self.root}",
                            "images")

    def records(self) -> list[ImageCaption]:
        """Every captioned stamp under root, sorted by key."""
        if not self.root.is_dir():
            raise FileNotFoundError(f"the Tux Paint stamps are missing: {self.root} is not a folder. Install them with "
                                    "`apt-get install tuxpaint-stamps-default` (Debian) or pass data.source.root=... "
                                    "pointing at a folder of NAME.png stamps with NAME.txt descriptions")
        records, skipped = [], []
        for png in sorted(self.root.rglob("*.png")):
            caption = first_line(png.with_suffix(".txt"))
            if caption is None:
                skipped.append(png)  # e.g. NAME_mirror.png, Tux Paint's mirrored variant of NAME.png
                continue
            records.append(ImageCaption(key=png.relative_to(self.root).as_posix(), captions=(caption,), path=str(png)))
        self.skipped = len(skipped)
        if skipped:
            total = len(skipped) + len(records)
            log.info("skipped %d of %d Tux Paint stamps without an English description .txt", len(skipped), total)
        return records

    def load_mask(self, record: ImageCaption) -> Image.Image | None:
        """The stamp's object mask (its alpha channel, "L", the image's size), None for an opaque stamp."""
        return read_alpha(record.path)


def first_line(path: Path) -> str | None:
    """The first non-empty line of ``path`` stripped (English in Tux Paint's files), None if missing or not English."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            line = next((line.strip() for line in f if line.strip()), None)
    except FileNotFoundError:
        return None
    return None if line is None or TRANSLATION.match(line) else line
