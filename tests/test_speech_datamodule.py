"""The speech data module on a JSON-lines manifest of generated audio: features, filters, batches, cache."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import soundfile as sf
import torch

from attend.data import (
    CharTokenizer,
    LogMelFrontEnd,
    SentencePieceTokenizer,
    SpecAugment,
    Spectrogram,
    SpeechDataModule,
)
from attend.data.audio import AudioReadError, JsonlManifest

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
    """Eight training utterances (the 3.5 s one over max_duration), two for validation, three for test."""
    durations = [0.5, 0.8, 1.2, 0.6, 3.5, 0.7, 0.9, 0.4]
    return JsonlManifest(
        train=write_manifest(tmp_path / "audio", "train", durations, TEXTS),
        val=write_manifest(tmp_path / "audio", "val", [0.6, 0.9], TEXTS[:2]),
        test=write_manifest(tmp_path / "audio", "test", [0.7, 0.5, 1.1], TEXTS[2:5]),
    )


@pytest.fixture()
def manifest(tmp_path):
    return sample_manifest(tmp_path)


def make_datamodule(source, tmp_path, **kwargs) -> SpeechDataModule:
    settings = {
        "tokenizer": CharTokenizer(),
        "frontend": LogMelFrontEnd(n_mels=40),
        "spec_augment": SpecAugment(freq_mask_param=8, time_mask_param=10),
        "batch_size": 3,
        "max_duration": 3.0,
        "cache_dir": str(tmp_path / "cache"),
        "max_skip_fraction": 0.5,  # the fixture's 3.5 s utterance is one of eight, over max_duration on purpose
    }
    datamodule = SpeechDataModule(source, **{**settings, **kwargs})
    datamodule.prepare_data()
    datamodule.setup()
    return datamodule


def test_batches_hold_padded_features_lengths_and_targets(manifest, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="attend.data"):
        datamodule = make_datamodule(manifest, tmp_path)
    assert len(datamodule.datasets["train"]) == 7  # the 3.5 s utterance is over max_duration
    assert datamodule.dropped == {"over 3.0 s": 1} and "train_4" in caplog.text
    batch = next(iter(datamodule.val_dataloader()))
    assert batch["src"].shape[0] == 2 and batch["src"].shape[2] == 40
    assert batch["src_lengths"].tolist() == sorted(batch["src_lengths"].tolist())  # sorted by duration for eval
    assert batch["src"].shape[1] == int(batch["src_lengths"].max())
    short = int(batch["src_lengths"].argmin())
    assert torch.all(batch["src"][short, batch["src_lengths"][short] :] == 0)  # zero padding
    tok = datamodule.tokenizer
    assert tok.decode(batch["tgt"][0, 1:].tolist()) in TEXTS[:2]
    assert datamodule.encoder_kwargs() == {"input_dim": 40}


def test_training_batches_have_similar_durations(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path, max_duration=None, batch_size=2)
    lengths = datamodule.datasets["train"].lengths()
    for batch in datamodule.train_dataloader():
        assert len(batch["ids"]) <= 2
        # buckets pair neighbours in duration order: never the shortest with the longest
        assert not {int(lengths.argmin()), int(lengths.argmax())} <= set(batch["ids"].tolist())


def test_spec_augment_masks_training_features_only(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path)
    train, val = datamodule.datasets["train"], datamodule.datasets["val"]
    assert not torch.equal(train[2]["features"], train[2]["features"])  # fresh masks every time
    assert torch.equal(val[0]["features"], val[0]["features"])


def test_features_are_cached_and_reused(manifest, tmp_path, monkeypatch):
    make_datamodule(manifest, tmp_path)
    assert list((tmp_path / "cache" / "store").glob("speech_features-*/manifest.json"))

    def fail(*args, **kwargs):
        raise AssertionError("audio read again despite the cache")

    monkeypatch.setattr("attend.data.audio.dataset.read_audio", fail)
    assert len(make_datamodule(manifest, tmp_path).datasets["test"]) == 3


def test_without_precompute_each_step_reads_the_audio(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path, precompute=False, cache_dir=None, spec_augment=None)
    cached = make_datamodule(manifest, tmp_path)
    assert datamodule.datasets["test"].lengths().tolist() == cached.datasets["test"].lengths().tolist()
    assert torch.allclose(datamodule.datasets["test"][0]["features"], cached.datasets["test"][0]["features"], atol=1e-2)


def test_corrupt_audio_is_skipped_and_counted(manifest, tmp_path, caplog):
    broken = tmp_path / "audio" / "train_1.wav"
    broken.write_bytes(b"RIFF not really a wave file")
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        datamodule = make_datamodule(manifest, tmp_path, cache_dir=None)
    assert len(datamodule.datasets["train"]) == 6
    assert "train_1" in caplog.text and "skipped 1 of 8" in caplog.text


def test_sentencepiece_units_as_targets(manifest, tmp_path):
    tokenizer = SentencePieceTokenizer(vocab_size=30, model_type="unigram")
    datamodule = make_datamodule(manifest, tmp_path, tokenizer=tokenizer)
    batch = next(iter(datamodule.test_dataloader()))
    assert datamodule.tokenizer.decode(batch["tgt"][0, 1:].tolist()) in TEXTS[2:5]


def test_audio_files_become_a_batch_and_readable_sources(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path)
    paths = [str(tmp_path / "audio" / "test_0.wav"), str(tmp_path / "audio" / "test_2.wav")]
    batch = datamodule.batch_from_sources(paths)
    assert batch["src"].shape[0] == 2 and batch["sources"] == paths
    spectrogram = datamodule.readable_source(batch, 0)
    assert isinstance(spectrogram, Spectrogram) and spectrogram.features.shape == (40, int(batch["src_lengths"][0]))
    assert spectrogram.seconds == pytest.approx(0.7, abs=0.05)
    with pytest.raises(AudioReadError, match="nope.wav"):
        datamodule.batch_from_sources([str(tmp_path / "nope.wav")])


def test_tokenizer_travels_in_the_state_dict(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path)
    fresh = SpeechDataModule(manifest, tokenizer=CharTokenizer(), frontend=LogMelFrontEnd(n_mels=40))
    fresh.load_state_dict(datamodule.state_dict())
    assert fresh.tokenizer.vocab_size == datamodule.tokenizer.vocab_size


def test_audio_shorter_than_a_window_is_a_read_error(tmp_path):
    from attend.data.audio.dataset import compute_features

    path = tmp_path / "click.wav"
    sf.write(path, np.zeros(100, dtype=np.float32), 16000)
    with pytest.raises(AudioReadError, match="click.wav.*shorter than one analysis window"):
        compute_features(LogMelFrontEnd(), str(path))


def test_feature_cache_is_keyed_by_every_front_end_setting(manifest, tmp_path):
    make_datamodule(manifest, tmp_path)
    make_datamodule(manifest, tmp_path, frontend=LogMelFrontEnd(n_mels=40, hop_ms=20.0))
    stores = list((tmp_path / "cache" / "store").glob("speech_features-*/manifest.json"))
    assert len(stores) == 6  # three splits, each for both hops
    slower = make_datamodule(manifest, tmp_path, frontend=LogMelFrontEnd(n_mels=40, hop_ms=20.0))
    faster = make_datamodule(manifest, tmp_path)
    assert slower.datasets["test"].lengths()[0] < faster.datasets["test"].lengths()[0]


def test_without_precompute_durations_come_from_the_audio_headers(manifest, tmp_path):
    from dataclasses import replace

    class Untimed:
        """Utterances without durations, as LibriSpeech and Tux Paint give them."""

        def splits(self):
            return {name: [replace(u, duration=None) for u in utts] for name, utts in manifest.splits().items()}

    datamodule = make_datamodule(Untimed(), tmp_path, precompute=False, cache_dir=None)
    assert datamodule.dropped == {"over 3.0 s": 1}  # the 3.5 s utterance, known from its header
    cached = make_datamodule(manifest, tmp_path)
    assert datamodule.datasets["train"].lengths().tolist() == cached.datasets["train"].lengths().tolist()
