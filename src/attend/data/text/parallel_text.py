"""Sentence-aligned corpora in the Multi30k/WMT layout: ``{root}/{split}.{lang}``, one line each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

from attend.data.bad_samples import DataError, DatasetMissingError, Skipped, decode_line
from attend.data.splitting import Pair
from attend.data.store import file_stamp

HOW_TO_GET = ("Expected one sentence per line in {root}/{{train,val,test}}.{{src,tgt}}, e.g. Multi30k: "
              "git clone https://github.com/multi30k/dataset and point root at dataset/data/task1/raw "
              "(gunzip the *.gz files; rename test_2016_flickr.* to test.* or pass test='test_2016_flickr').")


class ParallelTextError(DataError):
    """A parallel corpus is malformed as a whole (line counts differ)."""


class ParallelText:
    """Pairs from line-aligned files; a pair with a blank side, a line that is not valid UTF-8 or one holding a NUL
    byte comes as a ``Skipped`` item (file:line) in its place."""

    def __init__(self, root: str | os.PathLike, src_lang: str = "de", tgt_lang: str = "en", train: str = "train",
                 val: str = "val", test: str = "test") -> None:
        self.root = Path(root)
        self.src_lang = src_lang
        self.tgt_lang = tgt_lang
        self.split_names = {"train": train, "val": val, "test": test}

    def path(self, split: str, lang: str) -> Path:
        """The file of ``split`` ("train", "val", "test") in ``lang``."""
        return self.root / f"{self.split_names[split]}.{lang}"

    def settings(self) -> dict:
        """What the pairs depend on (example-store keys): the options and each file's ``file_stamp``."""
        paths = [self.path(split, lang) for split in self.split_names for lang in (self.src_lang, self.tgt_lang)]
        files = {str(path.resolve()): file_stamp(path) if path.is_file() else None for path in paths}
        return {"src_lang": self.src_lang, "tgt_lang": self.tgt_lang, "splits": self.split_names, "files": files}

    def splits(self) -> dict[str, list[Pair | Skipped]]:
        """{"train", "val", "test"} -> (source, target) pairs, and a ``Skipped`` item in place of each bad one."""
        if not self.root.is_dir():
            raise DatasetMissingError(f"parallel corpus folder {self.root} not found. {self._how_to_get()}")
        return {split: list(self.iter_split(split)) for split in self.split_names}

    def iter_split(self, split: str) -> Iterator[Pair | Skipped]:
        """The pairs of one split, streamed line by line (constant memory), a ``Skipped`` item for each bad one."""
        src_path, tgt_path = self.path(split, self.src_lang), self.path(split, self.tgt_lang)
        for path in (src_path, tgt_path):
            if not path.is_file():
                raise DatasetMissingError(f"{path} not found. {self._how_to_get()}".strip())
        with open(src_path, "rb") as src_file, open(tgt_path, "rb") as tgt_file:
            for number, (s, t) in enumerate(zip_longest(src_file, tgt_file), start=1):
                if s is None or t is None:
                    raise ParallelTextError(f"{src_path} has {count_lines(src_path)} lines but {tgt_path} has "
                                            f"{count_lines(tgt_path)}: they must be line-aligned")
                s, t = decode_line(s, number), decode_line(t, number)
                problem = line_problem(src_path, s, number) or line_problem(tgt_path, t, number)
                yield (s.strip(), t.strip()) if problem is None else problem

    def _how_to_get(self) -> str:
        return HOW_TO_GET.format(root=self.root)


def line_problem(path: Path, line: str | UnicodeDecodeError, number: int) -> Skipped | None:
    """Skipped(file:line, reason, problem) when a side of a pair cannot be used, else None."""
    where = f"{path}:{number}"
    if isinstance(line, UnicodeDecodeError):
        return Skipped(where, "invalid UTF-8", f"not valid UTF-8 ({line.reason}); re-save the file as UTF-8")
    if not line.strip():
        return Skipped(where, "empty line", f"the line is {'empty' if not line else 'only whitespace'}")
    if "\x00" in line:  # text holds no NUL: a binary file, or UTF-16 (every other byte NUL) read as UTF-8
        return Skipped(where, "NUL byte", "the line holds a NUL byte (a binary or UTF-16 file?); re-save the file as "
                                          "UTF-8 text")
    return None


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 file without line ends; a line that is not valid UTF-8 stops with file and line named."""
    if not path.is_file():
        raise DatasetMissingError(f"{path} not found.")
    with open(path, "rb") as f:
        lines = [decode_line(raw, number) for number, raw in enumerate(f, start=1)]
    for number, line in enumerate(lines, start=1):
        if isinstance(line, UnicodeDecodeError):
            raise ParallelTextError(f"{path}, line {number}: not valid UTF-8 ({line.reason}); re-save it as UTF-8")
    return lines  # type: ignore[return-value]  # every line decoded
