"""Speech features and durations in the memory-mapped example store: equal to the front end's, prepared once
(a second start reads no audio), repaired when damaged, resumed when interrupted, the same with workers."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from attend.data import LogMelFrontEnd
from attend.data.audio import AudioReadError
from attend.data.audio.dataset import StoredFeatures, compute_features
from attend.data.audio.feature_store import duration_store, feature_store, report_skips
from attend.data.bad_samples import BadSamples
from tests.test_speech_datamodule import make_datamodule, sample_manifest

FRONTEND = LogMelFrontEnd(n_mels=40)


@pytest.fixture()
def manifest(tmp_path):
    return sample_manifest(tmp_path)


@pytest.fixture()
def utterances(manifest):
    return manifest.splits()["train"]


def break_audio(tmp_path) -> None:
    """train_1.wav corrupt, train_3.wav missing."""
    (tmp_path / "audio" / "train_1.wav").write_bytes(b"RIFF not really a wave file")
    (tmp_path / "audio" / "train_3.wav").unlink()


def no_audio(monkeypatch) -> None:
    """Make every way of reading audio fail: what must not happen once the stores exist."""

    def fail(*args, **kwargs):
        raise AssertionError("audio read again despite the store")

    for name in ("attend.data.audio.feature_store.compute_features", "attend.data.audio.feature_store.audio_duration",
                 "attend.data.audio.dataset.read_audio"):
        monkeypatch.setattr(name, fail)


def stored_rows(store) -> list[tuple]:
    """Every row of a feature store as (index, frames, feature bytes)."""
    return [
        (store.value("index", row), store.value("frames", row), store.buffer("features", row).tobytes())
        for row in range(len(store))
    ]


def count_reads(monkeypatch) -> list[str]:
    """The paths compute_features is asked for from now on (in this process)."""
    paths: list[str] = []

    def counted(frontend, path):
        paths.append(path)
        return compute_features(frontend, path)

    monkeypatch.setattr("attend.data.audio.feature_store.compute_features", counted)
    return paths


# what the store holds ----------------------------------------------------------------------------
def test_stored_features_equal_the_front_ends_in_float16(utterances, tmp_path):
    store = feature_store(tmp_path / "store", utterances, FRONTEND, shard_size=3)
    assert store.column_names == ["index", "features", "frames"] and len(store) == len(utterances)
    features = StoredFeatures(store)
    for i, utterance in enumerate(utterances):
        expected = compute_features(FRONTEND, utterance.path).to(torch.float16).float()  # (N, F)
        assert torch.equal(features[i], expected) and features.frames[i] == expected.size(0)
    assert features[0].dtype == torch.float32
    features[0].zero_()  # a copy: writing to it leaves the store alone
    assert torch.equal(StoredFeatures(store)[0], compute_features(FRONTEND, utterances[0].path).half().float())


def test_datasets_read_features_from_the_store(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path, spec_augment=None)
    dataset = datamodule.datasets["test"]
    assert isinstance(dataset.features, StoredFeatures) and len(pickle.dumps(dataset.features)) < 4000  # no features
    for i, utterance in enumerate(dataset.utterances):
        expected = compute_features(datamodule.frontend, utterance.path).half().float()
        assert torch.equal(dataset[i]["features"], expected)
        assert dataset.lengths()[i] == expected.size(0)
    assert torch.equal(pickle.loads(pickle.dumps(dataset))[1]["features"], dataset[1]["features"])


def test_durations_store_holds_the_header_seconds(utterances, tmp_path):
    store = duration_store(tmp_path / "store", utterances, shard_size=3)
    assert store.column("index").tolist() == list(range(len(utterances)))
    assert np.allclose(store.column("duration"), [u.duration for u in utterances], atol=1e-3)


# prepared once -----------------------------------------------------------------------------------
@pytest.mark.parametrize("precompute", [True, False])
def test_a_second_start_reads_no_audio(manifest, tmp_path, monkeypatch, precompute):
    first = make_datamodule(manifest, tmp_path, precompute=precompute, spec_augment=None)
    no_audio(monkeypatch)
    again = make_datamodule(manifest, tmp_path, precompute=precompute, spec_augment=None)
    for split in ("train", "val", "test"):
        assert again.datasets[split].lengths().tolist() == first.datasets[split].lengths().tolist()
    if precompute:
        assert torch.equal(again.datasets["val"][1]["features"], first.datasets["val"][1]["features"])


@pytest.mark.parametrize("precompute", [True, False])
def test_skips_are_replayed_on_a_cached_start(manifest, tmp_path, monkeypatch, caplog, precompute):
    break_audio(tmp_path)
    first = make_datamodule(manifest, tmp_path, precompute=precompute)
    no_audio(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = make_datamodule(manifest, tmp_path, precompute=precompute)
    assert again.skipped == first.skipped and again.skipped["train"] == 3  # two unreadable, one too long
    reasons = again.bad_samples.reasons("train")
    assert reasons["missing file"] == 1 and reasons["corrupt audio"] == 1
    assert "train_1.wav" in caplog.text and "train_3.wav" in caplog.text and "skipped 2 of 8" in caplog.text
    assert len(again.datasets["train"]) == 5


def test_an_empty_split_gives_an_empty_store(tmp_path):
    store = feature_store(tmp_path / "store", [], FRONTEND)
    report_skips(store, [], BadSamples(), "test")
    features = StoredFeatures(store)
    assert len(features) == 0 and features.frames.tolist() == [] and store.column("index").tolist() == []


def test_no_readable_utterance_is_a_read_error(utterances, tmp_path):
    for utterance in utterances[:2]:
        open(utterance.path, "wb").close()  # empty files: unreadable
    store = feature_store(tmp_path / "store", utterances[:2], FRONTEND)
    assert len(store) == 0 and [s[1] for s in store.skipped] == ["corrupt audio", "corrupt audio"]
    with pytest.raises(AudioReadError, match="none of the 2 utterances of the train split could be read"):
        report_skips(store, utterances[:2], BadSamples(max_skip_fraction=1.0), "train")


# damaged, interrupted, parallel -------------------------------------------------------------------
def truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garble(path) -> None:
    path.write_text('{"shards": [{"file": "shard-00000.arrow", "ro', encoding="utf-8")


def overwrite(path) -> None:
    """Random bytes of the same length: the size agrees with the manifest, the Arrow footer does not."""
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


@pytest.mark.parametrize(
    "damage, name", [(truncate, "shard-00001.arrow"), (overwrite, "shard-00002.arrow"), (garble, "manifest.json")]
)
def test_a_damaged_store_is_rebuilt(utterances, tmp_path, caplog, damage, name):
    folder = tmp_path / "store"
    expected = stored_rows(feature_store(folder, utterances, FRONTEND, shard_size=3))
    damage(folder / name)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = feature_store(folder, utterances, FRONTEND, shard_size=3)
    assert "damaged" in caplog.text and str(folder) in caplog.text
    assert stored_rows(again) == expected
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        assert stored_rows(feature_store(folder, utterances, FRONTEND, shard_size=3)) == expected
    assert "damaged" not in caplog.text  # whole again


def test_an_interrupted_preparation_resumes(utterances, tmp_path, monkeypatch, caplog):
    folder = tmp_path / "store"
    expected = stored_rows(feature_store(folder, utterances, FRONTEND, shard_size=3))
    (folder / "manifest.json").unlink()  # interrupted before the manifest: shards 0 and 2 written, 1 not
    (folder / "shard-00001.arrow").unlink()
    reads = count_reads(monkeypatch)
    with caplog.at_level(logging.INFO, logger="attend.data"):
        again = feature_store(folder, utterances, FRONTEND, shard_size=3)
    assert reads == [u.path for u in utterances[3:6]]  # only the missing shard's utterances
    assert "2 reused" in caplog.text and stored_rows(again) == expected


def test_two_workers_prepare_the_same_store(utterances, tmp_path):
    (tmp_path / "audio" / "train_4.wav").write_bytes(b"garbage")
    alone = feature_store(tmp_path / "alone", utterances, FRONTEND, workers=0, shard_size=3)
    shared = feature_store(tmp_path / "shared", utterances, FRONTEND, workers=2, shard_size=3)
    assert len(alone.manifest["shards"]) == 3 and alone.skipped == shared.skipped and len(alone.skipped) == 1
    assert stored_rows(shared) == stored_rows(alone)
    durations = duration_store(tmp_path / "durations", utterances, workers=2, shard_size=3)
    assert durations.column("index").tolist() == alone.column("index").tolist()


def test_preparing_here_keeps_the_main_process_threads(utterances, tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        feature_store(tmp_path / "store", utterances[:2], FRONTEND)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


# loaders -----------------------------------------------------------------------------------------
def test_a_loader_worker_reads_the_store(manifest, tmp_path):
    here = make_datamodule(manifest, tmp_path, spec_augment=None)
    worker = make_datamodule(manifest, tmp_path, spec_augment=None, num_workers=1)
    batches = list(here.val_dataloader()), list(worker.val_dataloader())
    assert len(batches[0]) == len(batches[1]) > 0
    for a, b in zip(*batches, strict=True):
        assert torch.equal(a["src"], b["src"]) and torch.equal(a["src_lengths"], b["src_lengths"])
        assert torch.equal(a["tgt"], b["tgt"])


def test_a_spawned_loader_worker_maps_the_store_itself(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path, spec_augment=None)
    dataset = datamodule.datasets["test"]
    loader = DataLoader(dataset, batch_size=3, collate_fn=datamodule._collate(), num_workers=1,
                        multiprocessing_context="spawn")  # the dataset is pickled: the store travels as its folder
    (batch,) = list(loader)
    assert torch.equal(batch["src"], datamodule._collate()([dataset[i] for i in range(3)])["src"])
