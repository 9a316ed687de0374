"""Speech data for tests: a JSON-lines manifest of generated tones, the audio data module over it, and a tiny
espeak-ng corpus."""

from __future__ import annotations

import json
import shutil

import numpy as np
import soundfile as sf

from attend.data import CharTokenizer, DataModule, LogMelFrontEnd, SpecAugment
from attend.data.audio import (
    EspeakSpeech,
    JsonlManifest,
)
from tests.helpers.datamodules import speech_datamodule

TEXTS = ["one two", "three", "four five six", "seven eight", "nine", "ten eleven", "twelve", "zero one"]


def write_manifest(folder, name: str, durations: list[float], texts: list[str], rate: int = 22050) -> str:
    """WAV files of noise-modulated tones and a manifest naming them by relative path."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(len(name))
    lines = []
    for i, (duration, text) in enumerate(zip(durations, texts, strict=True)):
        t = np.arange(int(duration * rate)) / rate
        audio = 0.3 * np.sin(2 * np.pi * (200 + 50 * i) * t) + 0.01 * rng.standard_normal(t.size)
        sf.write(folder / f"{name}_{i}.wav", audio.astype(np.float32), rate)
        lines.append(json.dumps({"audio_filepath": f"{name}_{i}.wav", "text": text, "duration": duration}))
    path = folder / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def sample_manifest(tmp_path) -> JsonlManifest:
    """Eight training utterances (the 3.5 s one over max_source_len=300 frames), two for validation, three for test."""
    durations = [0.5, 0.8, 1.2, 0.6, 3.5, 0.7, 0.9, 0.4]
    return JsonlManifest(
        train=write_manifest(tmp_path / "audio", "train", durations, TEXTS),
        val=write_manifest(tmp_path / "audio", "val", [0.6, 0.9], TEXTS[:2]),
        test=write_manifest(tmp_path / "audio", "test", [0.7, 0.5, 1.1], TEXTS[2:5]),
    )


def make_datamodule(source, tmp_path, **options) -> DataModule:
    """The audio data module over ``source`` with small settings, prepared and set up, its cache in ``tmp_path``."""
    settings = {
        "tokenizer": CharTokenizer(),
        "frontend": LogMelFrontEnd(n_mels=40),
        "spec_augment": SpecAugment(freq_mask_param=8, time_mask_param=10),
        "batch_size": 3,
        "max_source_len": 300,  # feature frames: 3 s
        "cache_dir": str(tmp_path / "cache"),
        "max_skip_fraction": 0.5,  # the fixture's 3.5 s utterance is one of eight, over max_source_len on purpose
    }
    datamodule = speech_datamodule(source, **{**settings, **options})
    datamodule.prepare_data()
    datamodule.setup()
    return datamodule


def no_audio(monkeypatch) -> None:
    """Make every way the data module reads audio fail: what must not happen once the stores exist."""

    def fail(*args, **kwargs):
        raise AssertionError("audio read again despite the store")

    for name in ("compute_features", "audio_duration"):
        monkeypatch.setattr(f"attend.data.audio.modality.{name}", fail)


def encoded_stores(tmp_path) -> list:
    """The manifests of the encoded (feature) stores under ``tmp_path``'s cache."""
    return list((tmp_path / "cache" / "store").glob("encoded-*/manifest.json"))


HAS_ESPEAK = shutil.which("espeak-ng") is not None


def tiny_espeak(cache_dir, **kwargs) -> EspeakSpeech:
    """espeak-ng speech of 6, 2 and 2 utterances."""
    return EspeakSpeech(cache_dir, n_train=6, n_val=2, n_test=2, **kwargs)
