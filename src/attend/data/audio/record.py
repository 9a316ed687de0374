"""What every speech source yields: utterances, the errors they raise, reading audio and normalizing transcripts."""

from __future__ import annotations

import io
import os
import re
import unicodedata
from dataclasses import dataclass

import numpy as np
import soundfile
import torch
import torchaudio

from attend.data.bad_samples import DataError

APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})  # ’ ʼ ‘ -> '
LONE_APOSTROPHE = re.compile(r"'(?![^\s'])|(?<![^\s'])'")  # not between two word characters
CLIP = re.compile(r"^(?P<container>.+)#(?P<offset>\d+)\+(?P<size>\d+)$")  # "queen.1c#161106+7001", see clip_path


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


class AudioReadError(DataError):
    """An audio file is missing, corrupt or empty; the message names the file and the fix."""


def clip_path(container: str | os.PathLike, offset: int, size: int) -> str:
    """The path of an audio clip stored as ``size`` bytes at ``offset`` inside ``container`` (a game's resource
    file): ``container#offset+size``, which read_audio and audio_duration read like a file."""
    return f"{container}#{offset}+{size}"


def open_clip(path: str | os.PathLike) -> io.BytesIO | None:
    """The bytes of a ``clip_path`` as a file object; None when ``path`` is not one (a file of that name wins)."""
    match = CLIP.match(str(path))
    if match is None or os.path.isfile(path):
        return None
    container, offset, size = match["container"], int(match["offset"]), int(match["size"])
    if not os.path.isfile(container):
        raise AudioReadError(f"audio clip {str(path)!r}: its container {container} does not exist; check the data set "
                             "root or reinstall the package that holds it")
    with open(container, "rb") as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) < size:
        raise AudioReadError(f"audio clip {str(path)!r} runs past the end of {container} ({offset + len(data)} bytes); "
                             "the container is truncated: reinstall the package that holds it")
    return io.BytesIO(data)


def read_audio(path: str | os.PathLike, sample_rate: int = 16000) -> torch.Tensor:
    """The file's samples as (samples,) float32 mono in [-1, 1] at ``sample_rate``: channels averaged, resampled.
    ``path`` may be a ``clip_path`` (a clip inside a container file)."""
    clip = open_clip(path)
    if clip is None and not os.path.isfile(path):  # False, not an error, for a name too long or holding NUL
        raise AudioReadError(f"audio file {str(path)!r} does not exist: check the data set root or manifest paths")
    try:
        samples, rate = soundfile.read(path if clip is None else clip, dtype="float32", always_2d=True)  # (samples, C)
    except (RuntimeError, OSError, ValueError) as e:  # soundfile.LibsndfileError is a RuntimeError
        raise AudioReadError(f"audio file {str(path)!r} cannot be read: {e}; re-create or re-download it, or remove it "
                             "from the data set") from e
    if samples.shape[0] == 0:
        raise AudioReadError(f"audio file {str(path)!r} holds no samples; re-create it or remove it from the data set")
    if not np.isfinite(samples).all():  # a float file's NaN or infinity would make every feature NaN
        raise AudioReadError(f"audio file {str(path)!r} holds NaN or infinite samples; re-create it or remove it from "
                             "the data set")
    wave = torch.from_numpy(samples).mean(dim=1)  # (samples,)
    if rate != sample_rate:
        wave = torchaudio.functional.resample(wave, orig_freq=rate, new_freq=sample_rate)  # (samples',)
    return wave.contiguous()


def audio_duration(path: str | os.PathLike) -> float:
    """Seconds of audio, from the file's header (``path`` may be a ``clip_path``)."""
    clip = open_clip(path)
    try:
        return float(soundfile.info(path if clip is None else clip).duration)
    except (RuntimeError, OSError, ValueError) as e:
        raise AudioReadError(f"audio file {str(path)!r} cannot be read: {e}; check that it exists and is WAV, FLAC or "
                             "OGG") from e


def normalize_transcript(text: str) -> str:
    """NFC, lowercase; letters (any script), marks, digits and in-word apostrophes kept, the rest a single space."""
    text = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).lower()).translate(APOSTROPHES)
    kept = "".join(c if c == "'" or unicodedata.category(c)[0] in "LMN" else " " for c in text)
    return " ".join(LONE_APOSTROPHE.sub(" ", kept).split())
