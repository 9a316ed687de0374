"""Sentence-aligned corpora in the Multi30k/WMT layout: ``{root}/{split}.{lang}``, one line each."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from attend.data.splitting import Pair

log = logging.getLogger("attend.data")

HOW_TO_GET = (
    "Expected one sentence per line in {root}/{{train,val,test}}.{{src,tgt}}, e.g. Multi30k: "
    "git clone https://github.com/multi30k/dataset and point root at dataset/data/task1/raw "
    "(gunzip the *.gz files; rename test_2016_flickr.* to test.* or pass test='test_2016_flickr')."
)


class ParallelTextError(ValueError):
    """A parallel corpus file is malformed (line counts differ, bad UTF-8)."""


class ParallelText:
    """Pairs from line-aligned files; pairs with a blank side are skipped, counted and logged."""

    def __init__(
        self,
        root: str | os.PathLike,
        src_lang: str = "de",
        tgt_lang: str = "en",
        train: str = "train",
        val: str = "val",
        test: str = "test",
    ) -> None:
        self.root = Path(root)
        self.src_lang = src_lang
        self.tgt_lang = tgt_lang
        self.split_names = {"train": train, "val": val, "test": test}
        self.skipped: dict[str, int] = {}  # blank pairs skipped per split, after splits()

    def path(self, split: str, lang: str) -> Path:
        """The file of ``split`` ("train", "val", "test") in ``lang``."""
        return self.root / f"{self.split_names[split]}.{lang}"

    def splits(self) -> dict[str, list[Pair]]:
        """{"train", "val", "test"} -> (source, target) pairs."""
        if not self.root.is_dir():
            raise FileNotFoundError(f"parallel corpus folder {self.root} not found. {self._how_to_get()}")
        return {split: self.read_split(split) for split in self.split_names}

    def read_split(self, split: str) -> list[Pair]:
        """The pairs of one split, blank ones skipped."""
        src_path, tgt_path = self.path(split, self.src_lang), self.path(split, self.tgt_lang)
        src, tgt = read_lines(src_path, self._how_to_get()), read_lines(tgt_path, self._how_to_get())
        if len(src) != len(tgt):
            raise ParallelTextError(
                f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: they must be line-aligned"
            )
        pairs = [(s.strip(), t.strip()) for s, t in zip(src, tgt, strict=True)]
        kept = [(s, t) for s, t in pairs if s and t]
        self.skipped[split] = len(pairs) - len(kept)
        if self.skipped[split]:
            log.warning(
                "skipped %d of %d pairs of %s/%s.{%s,%s} with an empty side",
                self.skipped[split],
                len(pairs),
                self.root,
                self.split_names[split],
                self.src_lang,
                self.tgt_lang,
            )
        return kept

    def _how_to_get(self) -> str:
        return HOW_TO_GET.format(root=self.root)


def read_lines(path: Path, how_to_get: str = "") -> list[str]:
    """Lines of a UTF-8 file without line ends; errors name the file and line."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found. {how_to_get}".strip())
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                lines.append(raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n"))
            except UnicodeDecodeError as error:
                raise ParallelTextError(f"{path}, line {number}: not valid UTF-8 ({error.reason})") from error
    return lines
