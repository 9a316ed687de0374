"""LibriSpeech in its original layout: ROOT/SUBSET/SPEAKER/CHAPTER/ with FLAC files and a transcript per chapter."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from attend.data.audio.record import SpeechDataError, Utterance, normalize_transcript
from attend.data.bad_samples import Skipped

HOW_TO_GET = ("download the subsets from https://www.openslr.org/12 (e.g. train-clean-100.tar.gz, dev-clean.tar.gz, "
              "test-clean.tar.gz), extract them into one folder (they unpack into LibriSpeech/SUBSET) and pass "
              "data.source.root=.../LibriSpeech")


class LibriSpeech:
    """One utterance per ``SPEAKER-CHAPTER-UTT TRANSCRIPT`` line of the ``SPEAKER-CHAPTER.trans.txt`` files of each
    split's subsets. A malformed line raises SpeechDataError (file:line); a line that is not valid UTF-8 or whose
    FLAC file is missing comes as a ``Skipped`` item in its place."""

    def __init__(self, root: str | os.PathLike, train: Sequence[str] = ("train-clean-100",),
                 val: Sequence[str] = ("dev-clean",), test: Sequence[str] = ("test-clean",)) -> None:
        self.root = Path(root)
        self.subsets = {"train": list(train), "val": list(val), "test": list(test)}  # plain lists: Hydra's ListConfig

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"root": str(self.root), **self.subsets}

    def splits(self) -> dict[str, list[Utterance | Skipped]]:
        """{"train", "val", "test"} -> utterances of the split's subsets, in file order."""
        return {split: [u for name in subsets for u in self.subset(name)] for split, subsets in self.subsets.items()}

    def subset(self, name: str) -> list[Utterance | Skipped]:
        """Every utterance of one subset folder (e.g. "dev-clean"), sorted by speaker, chapter and line."""
        folder = self.root / name
        if not folder.is_dir():
            nested = self.root / "LibriSpeech" / name
            hint = f"; {nested} exists: set data.source.root={self.root / 'LibriSpeech'}" if nested.is_dir() else ""
            raise SpeechDataError(f"LibriSpeech subset folder {folder} does not exist{hint}. To get it, {HOW_TO_GET}")
        transcripts = sorted(folder.glob("*/*/*.trans.txt"))
        if not transcripts:
            raise SpeechDataError(f"LibriSpeech subset folder {folder} holds no "
                                  f"SPEAKER/CHAPTER/SPEAKER-CHAPTER.trans.txt files: the extraction looks incomplete; "
                                  f"{HOW_TO_GET}")
        return [u for path in transcripts for u in read_transcript(path)]


def read_transcript(path: Path) -> list[Utterance | Skipped]:
    """The utterances of one ``SPEAKER-CHAPTER.trans.txt``; blank lines are ignored, a bad one is a ``Skipped`` item."""
    chapter_id = path.name.removesuffix(".trans.txt")
    speaker = chapter_id.split("-")[0]
    utterances: list[Utterance | Skipped] = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8", errors="strict")
            except UnicodeDecodeError as e:
                problem = f"line {line_no} is not valid UTF-8 ({e.reason}); re-extract the subset or fix the line"
                utterances.append(Skipped(f"{path}:{line_no}", "invalid UTF-8", problem))
                continue
            if not line.strip():
                continue
            key, _, text = line.strip().partition(" ")
            if not key.startswith(f"{chapter_id}-") or not text.strip():
                raise SpeechDataError(f"{path}:{line_no}: expected `{chapter_id}-UTT TRANSCRIPT`, got "
                                      f"{line.strip()[:80]!r}; fix the line or re-extract the subset")
            flac = path.parent / f"{key}.flac"
            if not flac.is_file():
                problem = f"audio {flac} is missing; re-extract the subset or delete this line"
                utterances.append(Skipped(f"{path}:{line_no}", "missing file", problem))
                continue
            utterances.append(Utterance(key=key, path=str(flac), text=normalize_transcript(text), speaker=speaker))
    return utterances
