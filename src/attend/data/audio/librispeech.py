"""LibriSpeech in its original layout: ROOT/SUBSET/SPEAKER/CHAPTER/ with FLAC files and a transcript per chapter."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from attend.data.audio.record import SpeechDataError, Utterance, normalize_transcript
from attend.data.bad_samples import BadSamples

HOW_TO_GET = (
    "download the subsets from https://www.openslr.org/12 (e.g. train-clean-100.tar.gz, dev-clean.tar.gz, "
    "test-clean.tar.gz), extract them into one folder (they unpack into LibriSpeech/SUBSET) and pass "
    "data.source.root=.../LibriSpeech"
)


class LibriSpeech:
    """One utterance per transcript line; the subsets of each split are concatenated.

    Lines of ``SPEAKER-CHAPTER.trans.txt`` read ``SPEAKER-CHAPTER-UTT TRANSCRIPT``. A malformed line
    raises SpeechDataError naming file:line; a line that is not valid UTF-8 or whose FLAC file is missing
    is a bad sample for ``bad_samples`` (the data module's ``data.on_error`` policy): skipped, named and
    counted, or an error.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        train: Sequence[str] = ("train-clean-100",),
        val: Sequence[str] = ("dev-clean",),
        test: Sequence[str] = ("test-clean",),
    ) -> None:
        self.root = Path(root)
        self.subsets = {"train": list(train), "val": list(val), "test": list(test)}  # plain lists: Hydra's ListConfig
        self.bad_samples = BadSamples()  # the data module puts its own policy here

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"root": str(self.root), **self.subsets}

    def splits(self) -> dict[str, list[Utterance]]:
        """{"train", "val", "test"} -> utterances of the split's subsets, in file order."""
        return {split: self.split(split, subsets) for split, subsets in self.subsets.items()}

    def split(self, split: str, subsets: list[str]) -> list[Utterance]:
        """The utterances of the subsets of one split; bad lines go to ``bad_samples``."""
        self.bad_samples.begin(split, "lines")
        utterances = [u for subset in subsets for u in self.subset(subset, split)]
        total = len(utterances) + self.bad_samples.count(split, "lines")
        self.bad_samples.end(split, "lines", total, "utterances")
        return utterances

    def subset(self, name: str, split: str = "data") -> list[Utterance]:
        """Every utterance of one subset folder (e.g. "dev-clean"), sorted by speaker, chapter and line."""
        folder = self.root / name
        if not folder.is_dir():
            nested = self.root / "LibriSpeech" / name
            hint = f"; {nested} exists: set data.source.root={self.root / 'LibriSpeech'}" if nested.is_dir() else ""
            raise SpeechDataError(f"LibriSpeech subset folder {folder} does not exist{hint}. To get it, {HOW_TO_GET}")
        transcripts = sorted(folder.glob("*/*/*.trans.txt"))
        if not transcripts:
            raise SpeechDataError(
                f"LibriSpeech subset folder {folder} holds no SPEAKER/CHAPTER/SPEAKER-CHAPTER.trans.txt files: "
                f"the extraction looks incomplete; {HOW_TO_GET}"
            )
        return [u for path in transcripts for u in read_transcript(path, self.bad_samples, split)]


def read_transcript(path: Path, bad_samples: BadSamples | None = None, split: str = "data") -> list[Utterance]:
    """The utterances of one ``SPEAKER-CHAPTER.trans.txt``; blank lines are ignored, bad ones go to ``bad_samples``."""
    policy = bad_samples if bad_samples is not None else BadSamples()
    chapter_id = path.name.removesuffix(".trans.txt")
    speaker = chapter_id.split("-")[0]
    utterances = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8", errors="strict")
            except UnicodeDecodeError as e:
                problem = f"line {line_no} is not valid UTF-8 ({e.reason}); re-extract the subset or fix the line"
                policy.skip(split, "lines", f"{path}:{line_no}", "invalid UTF-8", problem)
                continue
            if not line.strip():
                continue
            key, _, text = line.strip().partition(" ")
            if not key.startswith(f"{chapter_id}-") or not text.strip():
                raise SpeechDataError(
                    f"{path}:{line_no}: expected `{chapter_id}-UTT TRANSCRIPT`, got {line.strip()[:80]!r}; "
                    "fix the line or re-extract the subset"
                )
            flac = path.parent / f"{key}.flac"
            if not flac.is_file():
                problem = f"audio {flac} is missing; re-extract the subset or delete this line"
                policy.skip(split, "lines", f"{path}:{line_no}", "missing file", problem)
                continue
            utterances.append(Utterance(key=key, path=str(flac), text=normalize_transcript(text), speaker=speaker))
    return utterances
