"""Asterisk's telephone prompts (Debian asterisk-core-sounds-LANG[-wav]): one professional speaker per language,
8 kHz recordings with exact transcripts, in English, French, Spanish, Italian and Russian."""

from __future__ import annotations

import gzip
import logging
import os
import random
from pathlib import Path

from attend.data.audio.record import AudioReadError, SpeechDataError, Utterance, audio_duration
from attend.data.audio.spoken import is_only_notes, spoken_text
from attend.data.bad_samples import Skipped
from attend.data.splitting import SPLITS, near_duplicate_groups

log = logging.getLogger("attend.data")

LANGUAGES = ("en", "fr", "es", "it", "ru")
SOUNDS = "/usr/share/asterisk/sounds/{language}"
TRANSCRIPTS = "/usr/share/doc/asterisk-core-sounds-{language}/core-sounds-{language}.txt.gz"
NEAR_DUPLICATE = 0.8  # texts at least this alike (difflib's ratio) share a split


class AsteriskPrompts:
    """Every prompt of ``language`` with a transcript and a recording, split so that no val or test text occurs in
    training, nor one a word away: utterances whose texts are near duplicates stay in one split (exactly ``n_val`` /
    ``n_test`` where the groups allow).

    Transcript lines are ``name: text`` (``name`` a path under ``sounds`` without ``.wav``). Notes in ``[...]``,
    ``(...)`` and ``<...>`` are not spoken: a transcript that is only notes (``[ascending tones]``, ``(5 seconds of
    silence)``, ``<beep ascending>``) is a counted "not speech" skip of the training split, as are a missing or
    unreadable recording; numbers are written as the speaker says them (``press 5`` -> ``press five``, ``1st`` ->
    ``first``). Prompts longer than ``max_seconds`` (English has a 73 s demo announcement) are skipped too, from every
    split: an evaluation batch padded to them would cost more than all the others."""

    def __init__(self, language: str = "en", sounds: str | os.PathLike | None = None,
                 transcripts: str | os.PathLike | None = None, n_val: int = 50, n_test: int = 60,
                 seed: int = 1234, max_seconds: float | None = 20.0) -> None:
        if language not in LANGUAGES:
            raise SpeechDataError(f"data.source.language={language!r}: Asterisk prompts exist in "
                                  f"{', '.join(LANGUAGES)}")
        self.language = language
        self.sounds = Path(sounds or SOUNDS.format(language=language))
        self.transcripts = Path(transcripts or TRANSCRIPTS.format(language=language))
        self.n_val = n_val
        self.n_test = n_test
        self.seed = seed
        self.max_seconds = max_seconds

    def settings(self) -> dict:
        """The constructor arguments (the transcript file is stamped by the records-store key)."""
        return {"language": self.language, "sounds": str(self.sounds), "transcripts": str(self.transcripts),
                "n_val": self.n_val, "n_test": self.n_test, "seed": self.seed, "max_seconds": self.max_seconds}

    def splits(self) -> dict[str, list[Utterance | Skipped]]:
        utterances, skipped = self.utterances()
        if self.n_val + self.n_test >= len(utterances):
            raise SpeechDataError(f"Asterisk {self.language!r} has only {len(utterances)} prompts: n_val={self.n_val} "
                                  f"+ n_test={self.n_test} leaves none to train on; lower data.source.n_val / n_test")
        parts = split_by_text(utterances, self.n_val, self.n_test, self.seed)
        parts["train"] = [*skipped, *parts["train"]]
        return parts

    def utterances(self) -> tuple[list[Utterance], list[Skipped]]:
        """The prompts that can be used, sorted by name, and the skipped entries."""
        package = f"asterisk-core-sounds-{self.language}"
        if not self.transcripts.is_file():
            raise SpeechDataError(f"the Asterisk {self.language!r} transcripts are missing: {self.transcripts} is not "
                                  f"a file. Install them with `apt-get install {package} {package}-wav` (Debian) or "
                                  "set data.source.transcripts=...")
        if not self.sounds.is_dir():
            raise SpeechDataError(f"the Asterisk {self.language!r} recordings are missing: {self.sounds} is not a "
                                  f"folder. Install them with `apt-get install {package}-wav` or set "
                                  "data.source.sounds=...")
        utterances, skipped = [], []
        for name, text in read_transcripts(self.transcripts):
            wav = self.sounds / f"{name}.wav"
            if not text.strip():
                skipped.append(Skipped(name, "empty transcript", f"{name}: the transcript is empty"))
            elif is_only_notes(text):
                skipped.append(Skipped(name, "not speech", f"{name}: {text!r} is a note (a tone, a silence), not "
                                       "speech"))
            elif not wav.is_file():
                skipped.append(Skipped(name, "no recording", f"{name}: no {wav} for the transcript {text!r}"))
            elif problem := self.duration_problem(name, wav):
                skipped.append(problem)
            elif spoken := spoken_text(text, self.language):
                utterances.append(Utterance(key=name, path=str(wav), text=spoken))
            else:
                skipped.append(Skipped(name, "empty transcript", f"{name}: {text!r} has no words"))
        if skipped:
            log.info("Asterisk %r: %d prompts, %d transcript entries skipped (%s)", self.language, len(utterances),
                     len(skipped), ", ".join(sorted({s.reason for s in skipped})))
        return sorted(utterances, key=lambda u: u.key), skipped

    def duration_problem(self, name: str, wav: Path) -> Skipped | None:
        """The skip of a recording that cannot be read or is over ``max_seconds``; None when it can be used."""
        if self.max_seconds is None:
            return None  # the audio plug-in reads the file, and skips it if it cannot
        try:
            seconds = audio_duration(wav)
        except AudioReadError as problem:
            return Skipped(name, "corrupt audio", str(problem))
        if seconds > self.max_seconds:
            return Skipped(name, "over max_seconds", f"{name}: {seconds:.1f} s, over data.source.max_seconds="
                           f"{self.max_seconds:g} (raise it to keep such prompts)")
        return None


def read_transcripts(path: Path) -> list[tuple[str, str]]:
    """(name, text) of each ``name: text`` line of a (gzipped) transcript file; comments (``;``) and blanks left out.
    The Italian file starts with a byte-order mark."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8-sig", errors="replace") as f:
        lines = [line.strip() for line in f]
    entries = []
    for line in lines:
        name, colon, text = line.partition(":")
        if colon and not line.startswith(";") and name.strip() and " " not in name.strip():
            entries.append((name.strip(), text.strip()))
    return entries


def split_by_text(utterances: list[Utterance], n_val: int, n_test: int, seed: int) -> dict[str, list[Utterance]]:
    """Seeded split in which utterances whose texts are equal or near duplicates (``NEAR_DUPLICATE``) are in one
    split: test and val take whole groups, drawn at random, while they fit ``n_test`` / ``n_val``; the rest train.
    Each split sorted by key."""
    by_text: dict[str, list[Utterance]] = {}
    for utterance in utterances:
        by_text.setdefault(utterance.text, []).append(utterance)
    texts = sorted(by_text)
    groups = [[u for i in group for u in by_text[texts[i]]] for group in near_duplicate_groups(texts, NEAR_DUPLICATE)]
    random.Random(seed).shuffle(groups)
    parts: dict[str, list[Utterance]] = {split: [] for split in SPLITS}
    wanted = {"test": n_test, "val": n_val}
    for group in groups:
        split = next((s for s, n in wanted.items() if len(parts[s]) + len(group) <= n), "train")
        parts[split].extend(group)
    return {split: sorted(part, key=lambda u: u.key) for split, part in parts.items()}
