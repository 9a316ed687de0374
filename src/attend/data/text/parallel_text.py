"""Sentence-aligned corpora in the Multi30k/WMT layout: ``{root}/{split}.{lang}``, one line each."""

from __future__ import annotations

import os
from pathlib import Path

from attend.data.bad_samples import BadSamples, DataError, DatasetMissingError
from attend.data.splitting import Pair

HOW_TO_GET = (
    "Expected one sentence per line in {root}/{{train,val,test}}.{{src,tgt}}, e.g. Multi30k: "
    "git clone https://github.com/multi30k/dataset and point root at dataset/data/task1/raw "
    "(gunzip the *.gz files; rename test_2016_flickr.* to test.* or pass test='test_2016_flickr')."
)


class ParallelTextError(DataError):
    """A parallel corpus is malformed as a whole (line counts differ)."""


class ParallelText:
    """Pairs from line-aligned files. A pair with an empty or whitespace-only side, or a line that is
    not valid UTF-8, is a bad sample for ``bad_samples`` (the data module's ``data.on_error`` policy):
    skipped, named with its file and line, and counted, or an error."""

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
        self.skipped: dict[str, int] = {}  # bad pairs skipped per split, after splits()
        self.bad_samples = BadSamples()  # the data module puts its own policy here

    def path(self, split: str, lang: str) -> Path:
        """The file of ``split`` ("train", "val", "test") in ``lang``."""
        return self.root / f"{self.split_names[split]}.{lang}"

    def splits(self) -> dict[str, list[Pair]]:
        """{"train", "val", "test"} -> (source, target) pairs."""
        if not self.root.is_dir():
            raise DatasetMissingError(f"parallel corpus folder {self.root} not found. {self._how_to_get()}")
        return {split: self.read_split(split) for split in self.split_names}

    def read_split(self, split: str) -> list[Pair]:
        """The pairs of one split, bad ones skipped (or an error, by the policy)."""
        src_path, tgt_path = self.path(split, self.src_lang), self.path(split, self.tgt_lang)
        src, tgt = decode_lines(src_path, self._how_to_get()), decode_lines(tgt_path, self._how_to_get())
        if len(src) != len(tgt):
            raise ParallelTextError(
                f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: they must be line-aligned"
            )
        self.bad_samples.begin(split, "lines")
        kept = []
        for number, (s, t) in enumerate(zip(src, tgt, strict=True), start=1):
            problem = line_problem(src_path, s, number) or line_problem(tgt_path, t, number)
            if problem is None:
                kept.append((s.strip(), t.strip()))
            else:
                self.bad_samples.skip(split, "lines", *problem)
        self.skipped[split] = len(src) - len(kept)
        self.bad_samples.end(split, "lines", len(src), "pairs")
        return kept

    def _how_to_get(self) -> str:
        return HOW_TO_GET.format(root=self.root)


def line_problem(path: Path, line: str | UnicodeDecodeError, number: int) -> tuple[str, str, str] | None:
    """(file:line, reason, problem) when a side of a pair cannot be used, else None."""
    where = f"{path}:{number}"
    if isinstance(line, UnicodeDecodeError):
        problem = f"not valid UTF-8 ({line.reason}); re-save the file as UTF-8"
        return where, "invalid UTF-8", problem
    if not line.strip():
        return where, "empty line", f"the line is {'empty' if not line else 'only whitespace'}"
    return None


def decode_lines(path: Path, how_to_get: str = "") -> list[str | UnicodeDecodeError]:
    """Lines of a UTF-8 file without line ends, each decoded on its own: a line that is not valid UTF-8
    is its UnicodeDecodeError, so the others stay usable and the bad one can be named."""
    if not path.is_file():
        raise DatasetMissingError(f"{path} not found. {how_to_get}".strip())
    lines: list[str | UnicodeDecodeError] = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                lines.append(raw.decode("utf-8-sig" if number == 1 else "utf-8", errors="strict").rstrip("\r\n"))
            except UnicodeDecodeError as error:
                lines.append(error)
    return lines


def read_lines(path: Path, how_to_get: str = "") -> list[str]:
    """Lines of a UTF-8 file without line ends; a line that is not valid UTF-8 stops with file and line named."""
    lines = decode_lines(path, how_to_get)
    for number, line in enumerate(lines, start=1):
        if isinstance(line, UnicodeDecodeError):
            raise ParallelTextError(f"{path}, line {number}: not valid UTF-8 ({line.reason}); re-save it as UTF-8")
    return lines  # type: ignore[return-value]  # every line decoded
