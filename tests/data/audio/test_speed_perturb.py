"""Speed perturbation of training speech (0.9 / 1.0 / 1.1 by resampling): the waveform, the stored versions and
the draw per example; validation and test keep the recordings' own speed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attend.data import LogMelFrontEnd
from attend.data.audio.modality import AudioModality, change_speed, compute_features
from tests.helpers.audio import encoded_stores, make_datamodule, no_audio, sample_manifest

SPEEDS = [0.9, 1.0, 1.1]


def test_a_faster_waveform_is_shorter_by_the_speed_and_keeps_its_tone():
    rate = 16000
    t = np.arange(rate) / rate
    wave = torch.from_numpy(np.sin(2 * np.pi * 400 * t).astype(np.float32))  # 1 s of 400 Hz
    for speed in SPEEDS:
        faster = change_speed(wave, speed)
        assert abs(faster.numel() - rate / speed) <= 1
        spectrum = torch.fft.rfft(faster).abs()
        peak = int(spectrum.argmax()) * rate / faster.numel()  # Hz
        assert abs(peak - 400 * speed) < 5  # pitch moves with the speed, as with sox's "speed"
    assert change_speed(wave, 1.0) is wave


def test_training_examples_are_drawn_at_each_speed_and_evaluation_at_none(tmp_path):
    datamodule = make_datamodule(sample_manifest(tmp_path), tmp_path, spec_augment=None, speed_perturb=SPEEDS)
    train = datamodule.datasets["train"]
    plain = int(train.lengths()[0])  # the stored source size: the recording's own speed
    seen = {int(train[0]["src"].shape[0]) for _ in range(60)}
    path = datamodule.records["train"].value("path", int(datamodule.encoded["train"].value("row", 0)))
    expected = {compute_features(datamodule.plugin.frontend, path, speed).shape[0] for speed in SPEEDS}
    assert seen == expected and plain in seen and len(seen) == 3
    assert {int(datamodule.datasets["val"][0]["src"].shape[0]) for _ in range(10)} == {int(datamodule.datasets[
        "val"].lengths()[0])}


def test_other_speeds_are_stored_once_for_the_training_split_only(tmp_path, monkeypatch):
    source = sample_manifest(tmp_path)
    first = make_datamodule(source, tmp_path, spec_augment=None, speed_perturb=SPEEDS)
    stores = list((tmp_path / "cache" / "store").glob("speed_perturbed-*/manifest.json"))
    assert len(stores) == 1 and len(encoded_stores(tmp_path)) == 3  # the encoded stores are the same as without
    perturbed = first.plugin.perturbed[first.encoded["train"].folder.name]
    assert set(perturbed.column_names) >= {"0.9", "1.1"}
    path = first.records["train"].value("path", int(first.encoded["train"].value("row", 1)))
    stored = np.frombuffer(perturbed.buffer("1.1", 1), dtype=np.float16).reshape(-1, 40)
    assert np.allclose(stored, compute_features(first.plugin.frontend, path, 1.1).numpy(), atol=1e-2)
    no_audio(monkeypatch)  # a cached start reads no audio at any speed
    again = make_datamodule(source, tmp_path, spec_augment=None, speed_perturb=SPEEDS)
    assert {int(again.datasets["train"][1]["src"].shape[0]) for _ in range(40)} == {
        int(np.frombuffer(store.buffer(column, 1), dtype=np.float16).size // 40)
        for store, column in [(again.encoded["train"], "features"), (perturbed, "0.9"), (perturbed, "1.1")]}


def test_without_precompute_the_speed_is_applied_on_the_fly(tmp_path):
    datamodule = make_datamodule(sample_manifest(tmp_path), tmp_path, spec_augment=None, speed_perturb=SPEEDS,
                                 precompute=False)
    assert not list((tmp_path / "cache" / "store").glob("speed_perturbed-*"))
    assert len({int(datamodule.datasets["train"][0]["src"].shape[0]) for _ in range(60)}) == 3


@pytest.mark.parametrize("speeds", [[0.0, 1.0], [-1.1], [9.0]])
def test_a_speed_that_is_not_a_positive_factor_is_refused(speeds):
    with pytest.raises(ValueError, match="data.modality.speed_perturb"):
        AudioModality(LogMelFrontEnd(n_mels=40), speed_perturb=speeds)


def test_an_utterance_too_short_to_read_faster_keeps_its_own_speed(tmp_path):
    """26 ms at 16 kHz is one 25 ms window at its own speed and none at 1.1: stored at its own speed for 1.1 (it
    crashed the speed-perturbed store at every start)."""
    from attend.data.audio import JsonlManifest
    from tests.helpers.audio import TEXTS, write_manifest

    source = JsonlManifest(train=write_manifest(tmp_path / "audio", "train", [0.026, 0.8, 1.2], TEXTS[:3]),
                           val=write_manifest(tmp_path / "audio", "val", [0.6], TEXTS[:1]),
                           test=write_manifest(tmp_path / "audio", "test", [0.7], TEXTS[:1]))
    datamodule = make_datamodule(source, tmp_path, spec_augment=None, speed_perturb=SPEEDS)
    encoded = datamodule.encoded["train"]
    short = next(row for row in range(len(encoded)) if int(encoded.value("source_size", row)) == 1)
    perturbed = datamodule.plugin.perturbed[encoded.folder.name]
    assert bytes(perturbed.buffer("1.1", short)) == bytes(encoded.buffer("features", short))
    assert len(perturbed.buffer("0.9", short)) == 40 * 2  # read slower, 29 ms: one window of its own
