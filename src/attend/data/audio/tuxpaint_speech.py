"""Tux Paint stamp descriptions read aloud by people: NAME_desc_LANG.ogg speaks the LANG line of NAME.txt."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from attend.data.audio.record import SpeechDataError, Utterance, normalize_transcript
from attend.data.images.tuxpaint import TUXPAINT_STAMPS, first_line
from attend.data.splitting import split_by_key

log = logging.getLogger("attend.data")

RECORDING = re.compile(r"_desc(?:_(?P<lang>[a-z]{2,3}(?:_[A-Z]{2})?(?:@\w+)?))?\.ogg$")  # no language: English


class TuxPaintSpeech:
    """One utterance per recorded stamp description in ``language`` (French: about 900; "en": NAME_desc.ogg and the
    first line of NAME.txt); a seeded split. A recording without a transcript is left out, counted in ``skipped``."""

    def __init__(self, root: str | os.PathLike = TUXPAINT_STAMPS, language: str = "fr", n_val: int = 100,
                 n_test: int = 120, seed: int = 1234) -> None:
        self.root = Path(root)
        self.language = language
        self.n_val = n_val
        self.n_test = n_test
        self.seed = seed
        self.skipped = 0  # recordings without a transcript, after splits()

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"root": str(self.root), "language": self.language, "n_val": self.n_val, "n_test": self.n_test,
                "seed": self.seed}

    def splits(self) -> dict[str, list[Utterance]]:
        """{"train", "val", "test"} -> utterances: exactly n_test test and n_val val, the rest train."""
        what = f"Tux Paint {self.language!r} recordings in {self.root}"
        return split_by_key(self.utterances(), self.n_val, self.n_test, self.seed, what, "utterances", SpeechDataError)

    def utterances(self) -> list[Utterance]:
        """Every recording in ``language`` that has a transcript, sorted by key."""
        if not self.root.is_dir():
            raise SpeechDataError(f"the Tux Paint stamps are missing: {self.root} is not a folder. Install them with "
                                  "`apt-get install tuxpaint-stamps-default` (Debian) or pass data.source.root=... "
                                  "pointing at a folder of NAME.txt descriptions with NAME_desc_LANG.ogg recordings")
        suffix = "_desc.ogg" if self.language == "en" else f"_desc_{self.language}.ogg"
        recordings = sorted(self.root.rglob(f"*{suffix}"))
        if not recordings:
            raise SpeechDataError(f"no *{suffix} recordings under {self.root}; languages with recordings there: "
                                  f"{', '.join(recording_languages(self.root)) or 'none'} "
                                  "(set data.source.language=...)")
        utterances, skipped = [], []
        for ogg in recordings:
            text = self._transcript(ogg.with_name(ogg.name[: -len(suffix)] + ".txt"))
            if not text:
                skipped.append(ogg.relative_to(self.root).as_posix())
                continue
            key = ogg.relative_to(self.root).with_suffix("").as_posix()
            utterances.append(Utterance(key=key, path=str(ogg), text=text))
        self.skipped = len(skipped)
        if skipped:
            log.warning("skipped %d of %d Tux Paint %r recordings without a %r line in their .txt file, e.g. %s",
                        len(skipped), len(recordings), self.language, self.language, ", ".join(skipped[:3]))
        return utterances

    def _transcript(self, txt: Path) -> str:
        """The normalized ``language`` line of a stamp's .txt file; "" when missing."""
        line = first_line(txt) if self.language == "en" else language_line(txt, self.language)
        return normalize_transcript(line or "")


def language_line(path: Path, language: str) -> str | None:
    """The text after ``LANG.utf8=`` in ``path``, None if the file or the line is missing."""
    prefix = f"{language}.utf8="
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return next((line[len(prefix) :].strip() for line in f if line.startswith(prefix)), None)
    except FileNotFoundError:
        return None


def recording_languages(root: Path) -> list[str]:
    """Sorted languages that have NAME_desc[_LANG].ogg recordings under ``root`` ("en" for no suffix)."""
    found = (RECORDING.search(path.name) for path in root.rglob("*_desc*.ogg"))
    return sorted({m.group("lang") or "en" for m in found if m})
