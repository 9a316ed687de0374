"""The spoken lines of the Debian game "Flight of the Amazon Queen" (package flight-of-the-amazon-queen, freeware
talkie): about thirty characters' voices, 11 kHz MP3 clips with the exact text, read from the game's resource file
at run time. Whole characters are held out for validation and test, so their voices are never heard in training."""

from __future__ import annotations

import difflib
import logging
import os
import re
import struct
from collections import Counter
from collections.abc import Sequence

import numpy as np
from num2words import num2words

from attend.data.audio.queen_resources import RESOURCE, QueenResources
from attend.data.audio.queen_texts import (
    GameText,
    Line,
    cutscene_lines,
    description_lines,
    dialogue_lines,
    game_text,
)
from attend.data.audio.record import AudioReadError, SpeechDataError, Utterance, audio_duration, clip_path
from attend.data.audio.spoken import spoken_text
from attend.data.bad_samples import Skipped

log = logging.getLogger("attend.data")

KINDS = ("dialogue", "descriptions", "cutscenes")
# Dialogue files are named after the person Joe talks to (BOB1.DOG, MAN2.DOG): the speaker is the stem without its
# number, lower-case, except these. MAN1/MAN2 (two prisoners) and ZOMBIE1/ZOMBIE2 (two zombie women) are merged,
# so that no voice could be on both sides of a split.
DIALOGUE_SPEAKERS = {"JOE": "joe", "AND": "anderson", "PRIN": "azura", "SEC": "secretary"}
# The cut-scene objects whose name says who speaks, by speaker. Others ("note", "path", "smoke", a narration) are
# placeholders the scene turns into someone: their lines are skipped ("speaker unknown").
CUTSCENE_SPEAKERS = {
    "joe": ("JOE", "Joe King"), "anderson": ("Anderson",), "azura": ("Princess Azura", "azura obj"),
    "bob": ("Trader Bob",), "bud": ("Bud",), "chef": ("chef",), "chief": ("chief",), "dog": ("guard dog",),
    "eddy": ("Eddy",), "faye": ("Faye",), "frank": ("Frank",), "henry": ("Henry",), "hugh": ("Hugh",),
    "ian": ("Ian",), "jim": ("Jimmy",), "john": ("John",), "klunk": ("Klunk",), "laris": ("bellboy",),
    "lola": ("Lola",), "lou": ("Skip",), "naomi": ("Naomi",), "oracle": ("guardian",), "rico": ("Rico",),
    "rita": ("Rita",), "secretary": ("secretary",), "showeram": ("showering Amazon",), "sparky": ("Sparky",),
    "tam": ("Mary-Lou",), "wedge": ("Wedgewood",), "witch": ("witch doctor",), "zombie": ("zombie woman",),
}
CUTSCENE_NAMES = {name: speaker for speaker, names in CUTSCENE_SPEAKERS.items() for name in names}
SPEAKER_UNKNOWN = "speaker unknown"
VAL_SPEAKERS = ("death", "secretary")  # 275 lines, 12.4 minutes with all kinds (a man and a woman)
TEST_SPEAKERS = ("klunk", "naomi")  # 203 lines, 10.9 minutes
MARKS = re.compile(r"\^_|@@")  # "Treatment^_" (a trademark sign), "@@ I think I'm in love @@" (Joe's thought)
YEAR = re.compile(r"\b(1[1-9]\d\d)(?:'?(s))?\b")  # "1922", "1940's": said as years
CLIPS = {"dialogue": re.compile(r"\d\d(?:[0-9A-F]{4}|SSSS|XXXX)[JP][0-9A-F]\.SB"),
         "descriptions": re.compile(r"JOE\d{4}[0-9A-F]\.SB"),
         "cutscenes": re.compile(r"(?!JOE\d)[0-9A-Z_]{5}\d\d[0-9A-F]\.SB")}


class AmazonQueenSpeech:
    """Every voiced line of ``kinds`` (dialogue, Joe's descriptions, cut-scenes) with its clip, text and speaker;
    ``val_speakers`` / ``test_speakers`` are held out whole (characters, lower-case: "bob", "witch", ...).

    No text of val or test is heard in training: a text said on both sides, or nearly (difflib's ratio >=
    ``near_duplicate``; texts under ``min_words`` words only when equal), is a counted skip of the side
    ``drop_shared_from`` names: "train" (the default: held-out voices are scarce, and a quarter of their lines, such
    as "what do you want", is said in training too) or "eval" (skips of val and test then pass data.max_skip_fraction
    only when raised). Also counted skips, in the split of their speaker (training when unknown): a text without a
    clip, a clip without a text, a clip that cannot be decoded, one over ``max_seconds`` and a text with no words
    ("<gulp>"). Cut-scene lines whose speaker the scene data does not name are left out (logged): they cannot be
    placed on a side of the split. ``seed`` is recorded only: the split is fixed by the speakers."""

    def __init__(self, resource: str | os.PathLike | None = None, kinds: Sequence[str] = KINDS,
                 val_speakers: Sequence[str] = VAL_SPEAKERS, test_speakers: Sequence[str] = TEST_SPEAKERS,
                 seed: int = 1234, max_seconds: float | None = 20.0, near_duplicate: float = 0.8,
                 min_words: int = 3, drop_shared_from: str = "train") -> None:
        if unknown := [kind for kind in kinds if kind not in KINDS]:
            raise SpeechDataError(f"data.source.kinds: {', '.join(unknown)} unknown; choose from {', '.join(KINDS)}")
        if both := sorted(set(val_speakers) & set(test_speakers)):
            raise SpeechDataError(f"speakers {', '.join(both)} are in both data.source.val_speakers and "
                                  "test_speakers; hold each one out for one split only")
        if drop_shared_from not in ("train", "eval"):
            raise SpeechDataError(f"data.source.drop_shared_from={drop_shared_from!r}: choose train or eval")
        self.resource = str(resource or RESOURCE)
        self.kinds = list(kinds)
        self.val_speakers = list(val_speakers)
        self.test_speakers = list(test_speakers)
        self.seed = seed
        self.max_seconds = max_seconds
        self.near_duplicate = near_duplicate
        self.min_words = min_words
        self.drop_shared_from = drop_shared_from

    def settings(self) -> dict:
        """The constructor arguments (the resource file is stamped by the records-store key)."""
        return {"resource": self.resource, "kinds": self.kinds, "val_speakers": self.val_speakers,
                "test_speakers": self.test_speakers, "seed": self.seed, "max_seconds": self.max_seconds,
                "near_duplicate": self.near_duplicate, "min_words": self.min_words,
                "drop_shared_from": self.drop_shared_from}

    def splits(self) -> dict[str, list[Utterance | Skipped]]:
        """{"train", "val", "test"} -> utterances and skips, each sorted by key."""
        items = self.items()
        known = sorted({speaker for speaker, item in items if isinstance(item, Utterance)})
        if unknown := [s for s in (*self.val_speakers, *self.test_speakers) if s not in known]:
            raise SpeechDataError(f"data.source.val_speakers / test_speakers: {', '.join(unknown)} not among the "
                                  f"speakers of {', '.join(self.kinds)}: {', '.join(known)}")
        held_out = {**{s: "val" for s in self.val_speakers}, **{s: "test" for s in self.test_speakers}}
        parts: dict[str, list[Utterance | Skipped]] = {"train": [], "val": [], "test": []}
        unnamed = 0
        for speaker, item in items:
            if isinstance(item, Skipped) and item.reason == SPEAKER_UNKNOWN:
                unnamed += 1
            else:
                parts[held_out.get(speaker, "train")].append(item)
        if unnamed:
            log.info("Amazon Queen: %d cut-scene lines left out, their speaker unnamed", unnamed)
        self.drop_shared_texts(parts)
        for split, part in parts.items():
            utterances = [u for u in part if isinstance(u, Utterance)]
            log.info("Amazon Queen %s: %d lines, %.1f minutes, speakers %s; skipped %s", split, len(utterances),
                     sum(u.duration or 0 for u in utterances) / 60, ", ".join(sorted({u.speaker for u in utterances})),
                     dict(Counter(s.reason for s in part if isinstance(s, Skipped))) or "none")
        return {split: sorted(part, key=lambda item: item.key) for split, part in parts.items()}

    def drop_shared_texts(self, parts: dict[str, list[Utterance | Skipped]]) -> None:
        """Skip the lines of the ``drop_shared_from`` side whose text the other side says too, or nearly."""
        texts = {split: [u.text for u in part if isinstance(u, Utterance)] for split, part in parts.items()}
        if self.drop_shared_from == "train":
            said = SaidTexts(texts["val"] + texts["test"], self.near_duplicate, self.min_words)
            dropped, reason = ["train"], "text said in val or test"
        else:
            said = SaidTexts(texts["train"], self.near_duplicate, self.min_words)
            dropped, reason = ["val", "test"], "text heard in training"
        for split in dropped:
            parts[split] = [said.skip(item, reason) if isinstance(item, Utterance) and said.said(item.text) else item
                            for item in parts[split]]

    def items(self) -> list[tuple[str, Utterance | Skipped]]:
        """(speaker, utterance or skip) of every line of ``kinds``; speaker "" when unknown."""
        resources = QueenResources(self.resource)
        lines = self.lines(resources)
        claimed = {line.clip for line in lines}
        items = [item for line in unique_clips(lines) if (item := self.item(resources, line)) is not None]
        for kind in self.kinds:
            for clip in resources.names(".SB"):
                if CLIPS[kind].fullmatch(clip) and clip not in claimed and owner_exists(resources, kind, clip):
                    items.append(("", Skipped(clip.removesuffix(".SB"), "no text", f"{clip}: a {kind} voice clip "
                                              "without a text")))
        return items

    def lines(self, resources: QueenResources) -> list[Line]:
        """The lines of ``kinds`` as written, with the clips they name."""
        lines: list[Line] = []
        try:
            if "dialogue" in self.kinds:
                for name in resources.names(".DOG"):
                    lines += dialogue_lines(name, resources.read(name, skip=20))
            if "descriptions" in self.kinds or "cutscenes" in self.kinds:
                text = game_text(resources.read("QUEEN.JAS", skip=20), resources.read_text("QUEEN2.JAS"))
                lines += description_lines(text) if "descriptions" in self.kinds else []
                lines += self.cutscenes(resources, text) if "cutscenes" in self.kinds else []
        except (struct.error, ValueError, IndexError) as e:
            raise SpeechDataError(f"{self.resource}: a dialogue or scene entry is malformed ({e}); reinstall "
                                  "flight-of-the-amazon-queen or set data.source.kinds to the kinds that read") from e
        return lines

    def cutscenes(self, resources: QueenResources, text: GameText) -> list[Line]:
        return [line for name in resources.names(".CUT") for line in cutscene_lines(name, resources.read(name, 20),
                                                                                     text)]

    def item(self, resources: QueenResources, line: Line) -> tuple[str, Utterance | Skipped] | None:
        """The speaker and the utterance of one line, or the skip that says why it cannot be one; None for an empty
        segment without a clip (a pause between two commands)."""
        speaker, key = speaker_of(line), line.clip.removesuffix(".SB")
        text, written = line_text(line.text), any(c.isalnum() for c in line.text)
        entry = resources.entries.get(line.clip)
        if entry is None:
            if not written:
                return None
            return speaker, Skipped(key, "no clip", f"{line.source}: no voice clip {line.clip} for {line.text!r}")
        if not text:
            return speaker, (Skipped(key, "not speech", f"{line.clip}: {line.text!r} ({line.source}) is a note, "
                                     "not words") if written else
                             Skipped(key, "no text", f"{line.clip}: an empty segment of {line.source}"))
        if not speaker:
            return speaker, Skipped(key, SPEAKER_UNKNOWN, f"{line.clip}: {line.source} does not say who speaks "
                                    f"{line.text!r} (its object is {line.who or 'a narration'!r})")
        path = clip_path(resources.path, entry.offset, entry.size)
        try:
            seconds = audio_duration(path)
        except AudioReadError as e:
            return speaker, Skipped(key, "corrupt audio", f"{line.clip}: {e}")
        if self.max_seconds is not None and seconds > self.max_seconds:
            return speaker, Skipped(key, "over max_seconds", f"{line.clip}: {seconds:.1f} s, over data.source."
                                    f"max_seconds={self.max_seconds:g} (raise it to keep such lines)")
        return speaker, Utterance(key=key, path=path, text=text, duration=seconds, speaker=speaker)


def speaker_of(line: Line) -> str:
    """The character who says a line: "joe", a dialogue file's person, a named cut-scene person; "" if unknown."""
    if line.source.endswith(".CUT"):
        return CUTSCENE_NAMES.get(line.who, "")
    return DIALOGUE_SPEAKERS.get(line.who, line.who.lower())


def line_text(text: str) -> str:
    """The words said: marks and notes ("<gulp>") dropped, years and numbers in words, normalised."""
    text = YEAR.sub(lambda m: f" {year_words(m[1], bool(m[2]))} ", MARKS.sub(" ", text))
    return spoken_text(text, "en")


def year_words(year: str, decade: bool) -> str:
    """``1922`` -> nineteen twenty-two; with ``decade`` (1940's) -> nineteen forties."""
    words = num2words(int(year), to="year")
    return (words[:-1] + "ies" if words.endswith("y") else words + "s") if decade else words


def unique_clips(lines: list[Line]) -> list[Line]:
    """The lines with the first text of each clip (a clip named twice is played for the first)."""
    seen: dict[str, Line] = {}
    for line in lines:
        seen.setdefault(line.clip, line)
    return list(seen.values())


def owner_exists(resources: QueenResources, kind: str, clip: str) -> bool:
    """Whether a clip belongs to ``kind``: descriptions all do; a cut-scene's its scene file exists."""
    return kind != "cutscenes" or f"{clip[:5].rstrip('_')}.CUT" in resources


class SaidTexts:
    """The normalised texts of one side of the split, to find a text said there: the same text, or one at least
    ``threshold`` alike (difflib's ratio) when both have ``min_words`` words or more."""

    def __init__(self, texts: list[str], threshold: float, min_words: int) -> None:
        self.texts = sorted({t for t in texts if len(t.split()) >= min_words})
        self.exact = set(texts)
        self.threshold = threshold
        self.min_words = min_words
        self.alphabet = {c: i for i, c in enumerate(sorted({c for t in self.texts for c in t}))}
        self.counts = np.stack([self.letters(t) for t in self.texts]) if self.texts else np.zeros((0, 0))  # (N, A)
        self.lengths = np.array([len(t) for t in self.texts])  # (N,)
        self.answers: dict[str, bool] = {}

    def said(self, text: str) -> bool:
        if text not in self.answers:
            self.answers[text] = text in self.exact or self.near(text)
        return self.answers[text]

    def near(self, text: str) -> bool:
        """Whether a text of ``min_words`` words or more is ``threshold`` alike to one of the texts: difflib's
        quick_ratio (shared letters, an upper bound of the ratio) for all at once, then the ratio of those left."""
        if len(text.split()) < self.min_words or not self.texts:
            return False
        shared = np.minimum(self.counts, self.letters(text)).sum(axis=1)  # (N,)
        candidates = np.nonzero(2 * shared >= self.threshold * (self.lengths + len(text)))[0]
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(text)
        for i in candidates:
            matcher.set_seq1(self.texts[i])
            if matcher.ratio() >= self.threshold:
                return True
        return False

    def letters(self, text: str) -> np.ndarray:
        """How often each character of the alphabet is in ``text`` (others cannot be shared)."""
        counts = np.zeros(len(self.alphabet), dtype=np.int64)
        for c in text:
            if (i := self.alphabet.get(c)) is not None:
                counts[i] += 1
        return counts

    @staticmethod
    def skip(utterance: Utterance, reason: str) -> Skipped:
        return Skipped(utterance.key, reason, f"{utterance.key} ({utterance.speaker}): {utterance.text!r} is said "
                       "on the other side of the split too, or nearly")
