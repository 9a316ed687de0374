"""What every speech source yields: utterances, the errors they raise, reading audio and normalizing transcripts."""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import soundfile
import torch
import torchaudio

from attend.data.bad_samples import DataError

APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})  # ’ ʼ ‘ -> '
LONE_APOSTROPHE = re.compile(r"'(?![^\s'])|(?<![^\s'])'")  # not between two word characters


@dataclass(frozen=True)
class Utterance:
    """One recording and its transcript."""

    key: str  # unique id, e.g. "1272-128104-0000" or "espeak/train/00042"
    path: str  # audio file (WAV, FLAC or OGG)
    text: str  # the transcript, already passed through normalize_transcript
    duration: float | None = None  # seconds, when the source knows it without reading audio
    speaker: str = ""


class SpeechDataError(DataError):
    """A speech corpus layout or manifest is missing or malformed; the message names the file, the line and the fix."""


class AudioReadError(ValueError):
    """An audio file is missing, corrupt or empty; the message names the file and the fix."""


def read_audio(path: str | os.PathLike, sample_rate: int = 16000) -> torch.Tensor:
    """The file's samples as (samples,) float32 mono in [-1, 1] at ``sample_rate``: channels averaged, resampled."""
    if not Path(path).is_file():
        raise AudioReadError(f"audio file {str(path)!r} does not exist: check the data set root or manifest paths")
    try:
        samples, rate = soundfile.read(path, dtype="float32", always_2d=True)  # (samples, channels)
    except (RuntimeError, OSError, ValueError) as e:  # soundfile.LibsndfileError is a RuntimeError
        raise AudioReadError(f"audio file {str(path)!r} cannot be read: {e}; re-create or re-download it, or remove it "
                             "from the data set") from e
    if samples.shape[0] == 0:
        raise AudioReadError(f"audio file {str(path)!r} holds no samples; re-create it or remove it from the data set")
    wave = torch.from_numpy(samples).mean(dim=1)  # (samples,)
    if rate != sample_rate:
        wave = torchaudio.functional.resample(wave, orig_freq=rate, new_freq=sample_rate)  # (samples',)
    return wave.contiguous()


def audio_duration(path: str | os.PathLike) -> float:
    """Seconds of audio, from the file's header."""
    try:
        return float(soundfile.info(path).duration)
    except (RuntimeError, OSError, ValueError) as e:
        raise AudioReadError(f"audio file {str(path)!r} cannot be read: {e}; check that it exists and is WAV, FLAC or "
                             "OGG") from e


def normalize_transcript(text: str) -> str:
    """NFC, lowercase; letters (any script), marks, digits and in-word apostrophes kept, the rest a single space."""
    text = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).lower()).translate(APOSTROPHES)
    kept = "".join(c if c == "'" or unicodedata.category(c)[0] in "LMN" else " " for c in text)
    return " ".join(LONE_APOSTROPHE.sub(" ", kept).split())
