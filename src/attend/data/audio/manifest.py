"""NeMo-style JSON-lines manifests: one {"audio_filepath", "text", "duration"} object per line."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from attend.data.audio.record import SpeechDataError, Utterance, normalize_transcript
from attend.data.bad_samples import Skipped

LINE_FORMAT = '{"audio_filepath": "a/b.wav", "text": "the transcript", "duration": 3.2}'


class JsonlManifest:
    """One manifest file per split (audio paths relative to its folder; blank lines ignored; an optional "speaker"
    kept). A line that is not valid UTF-8 is a ``Skipped`` item; a missing audio file is a skip when it is read."""

    def __init__(self, train: str | os.PathLike, val: str | os.PathLike, test: str | os.PathLike) -> None:
        self.files = {"train": Path(train), "val": Path(val), "test": Path(test)}

    def settings(self) -> dict:
        """The constructor arguments."""
        return {split: str(path) for split, path in self.files.items()}

    def splits(self) -> dict[str, list[Utterance | Skipped]]:
        """{"train", "val", "test"} -> utterances in manifest order, a ``Skipped`` item in place of each bad line."""
        return {split: read_manifest(path) for split, path in self.files.items()}


def read_manifest(path: Path) -> list[Utterance | Skipped]:
    """The utterances of one JSON-lines manifest, keyed by audio_filepath as written."""
    if not path.is_file():
        raise SpeechDataError(f"manifest {path} does not exist: it should hold one JSON object per line, like "
                              f"{LINE_FORMAT}; set data.source.train / val / test to your manifest files")
    utterances: list[Utterance | Skipped] = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8", errors="strict")
            except UnicodeDecodeError as e:
                problem = f"line {line_no} is not valid UTF-8 ({e.reason}); re-save the manifest as UTF-8"
                utterances.append(Skipped(f"{path}:{line_no}", "invalid UTF-8", problem))
                continue
            if line.strip():
                utterances.append(parse_line(line, f"{path}:{line_no}", path.parent))
    return utterances


def parse_line(line: str, where: str, folder: Path) -> Utterance:
    """One manifest line as an Utterance; ``where`` ("file:line") names it in errors."""
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError) as e:  # JSONDecodeError; an integer of over 4300 digits; nesting too deep
        raise SpeechDataError(f"{where}: not valid JSON ({e}); each line must be one object like {LINE_FORMAT}") from e
    if not isinstance(entry, dict):
        raise SpeechDataError(f"{where}: expected a JSON object like {LINE_FORMAT}, got {type(entry).__name__}")
    try:  # a lone surrogate escape ("\ud800") decodes to a str that no UTF-8 file or example store can hold
        json.dumps(entry, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        raise SpeechDataError(f"{where}: a string holds a lone surrogate escape ({e.object[e.start]!r}), which is "
                              "not text; fix the line") from e
    if missing := [k for k in ("audio_filepath", "text", "duration") if k not in entry]:
        raise SpeechDataError(f"{where}: missing key(s) {missing}; each line needs them all, like {LINE_FORMAT}")
    audio, text, duration = entry["audio_filepath"], entry["text"], entry["duration"]
    if not isinstance(audio, str) or not isinstance(text, str):
        raise SpeechDataError(f"{where}: audio_filepath and text must be strings; fix the line")
    if (seconds := seconds_or_none(duration)) is None:
        raise SpeechDataError(f"{where}: duration {duration!r:.40} is not a number of seconds >= 0; fix the line")
    speaker = entry.get("speaker", "")
    return Utterance(key=audio, path=str(folder / audio),  # an absolute audio_filepath replaces the folder
                     text=normalize_transcript(text), duration=seconds,
                     speaker=str(speaker) if speaker is not None else "")


def seconds_or_none(value) -> float | None:
    """A manifest's duration as seconds; None unless it is a finite number >= 0 (NaN, Infinity, 1e999 and integers
    too large for a float are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
