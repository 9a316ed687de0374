"""The audio plug-in through the data module, on a JSON-lines manifest of generated audio: features in the
encoded store, the frame-counting length filter, SpecAugment, batches, readable sources."""

from __future__ import annotations

import logging
import pickle
from dataclasses import replace

import numpy as np
import pytest
import soundfile as sf
import torch
from torch.utils.data import DataLoader

from attend.data import CharTokenizer, LogMelFrontEnd, SentencePieceTokenizer, Spectrogram
from attend.data.audio import AudioReadError
from attend.data.audio.modality import compute_features
from attend.data.bad_samples import Skipped
from tests.helpers.audio import TEXTS, encoded_stores, make_datamodule, no_audio, sample_manifest
from tests.helpers.datamodules import speech_datamodule

SPLITS = ("train", "val", "test")


@pytest.fixture()
def manifest(tmp_path):
    return sample_manifest(tmp_path)


def utterances(source, split: str) -> list:
    return [u for u in source.splits()[split] if not isinstance(u, Skipped)]


def test_batches_hold_padded_features_lengths_and_targets(manifest, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="attend.data"):
        datamodule = make_datamodule(manifest, tmp_path)
    assert len(datamodule.datasets["train"]) == 7  # the 3.5 s utterance is over max_source_len
    assert datamodule.dropped == 1 and "train_4" in caplog.text and "over data.max_source_len=300" in caplog.text
    assert datamodule.bad_samples.reasons("train") == {"source over max_source_len": 1}
    batch = next(iter(datamodule.val_dataloader()))
    assert batch["src"].shape[0] == 2 and batch["src"].shape[2] == 40 and batch["src"].dtype == torch.float32
    assert batch["src_lengths"].tolist() == sorted(batch["src_lengths"].tolist())  # sorted by duration for eval
    assert batch["src"].shape[1] == int(batch["src_lengths"].max())
    short = int(batch["src_lengths"].argmin())
    assert torch.all(batch["src"][short, batch["src_lengths"][short] :] == 0)  # zero padding
    tok = datamodule.tokenizer
    assert tok.decode(batch["tgt"][0, 1:].tolist()) in TEXTS[:2]
    assert [tok.decode(t) for t in batch["tgt"]] == batch["references"]
    assert datamodule.encoder_kwargs() == {"input_dim": 40} and datamodule.modality == "audio"
    assert datamodule.tokenizers() == {"target": tok}


def test_max_source_len_counts_feature_frames(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path, max_source_len=70, max_skip_fraction=1.0)
    frames = [compute_features(datamodule.plugin.frontend, u.path).size(0) for u in utterances(manifest, "train")]
    assert frames[0] == pytest.approx(50, abs=3)  # 0.5 s at a 10 ms hop
    kept = [i for i, n in enumerate(frames) if n <= 70]
    assert 0 < len(kept) < 8 and datamodule.dropped == 8 - len(kept)
    train = datamodule.datasets["train"]
    assert sorted(train[i]["id"] for i in range(len(train))) == kept


def test_training_batches_have_similar_durations(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path, max_source_len=None, batch_size=2)
    lengths = datamodule.datasets["train"].lengths()
    for batch in datamodule.train_dataloader():
        assert len(batch["ids"]) <= 2
        # buckets pair neighbours in duration order: never the shortest with the longest
        assert not {int(lengths.argmin()), int(lengths.argmax())} <= set(batch["ids"].tolist())


def test_spec_augment_masks_training_features_only(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path)
    train, val = datamodule.datasets["train"], datamodule.datasets["val"]
    assert not torch.equal(train[2]["src"], train[2]["src"])  # fresh masks every time
    assert torch.equal(val[0]["src"], val[0]["src"])


def test_stored_features_are_the_front_end_s_in_float16(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path, spec_augment=None)
    dataset = datamodule.datasets["test"]
    for i, utterance in enumerate(utterances(manifest, "test")):
        expected = compute_features(datamodule.plugin.frontend, utterance.path).half().float()  # (N, F)
        assert torch.equal(dataset[i]["src"], expected) and dataset.lengths()[i] == expected.size(0)
    dataset[0]["src"].zero_()  # a copy: writing to it leaves the store alone
    assert dataset[0]["src"].abs().sum() > 0
    data = pickle.dumps(dataset)
    encoded = datamodule.encoded["test"]
    assert not any(encoded.buffer("features", row).tobytes() in data for row in range(len(encoded)))  # folders only
    assert torch.equal(pickle.loads(data)[1]["src"], dataset[1]["src"])


@pytest.mark.parametrize("precompute", [True, False])
def test_features_are_stored_and_reused(manifest, tmp_path, monkeypatch, precompute):
    first = make_datamodule(manifest, tmp_path, precompute=precompute, spec_augment=None)
    assert len(encoded_stores(tmp_path)) == 3
    no_audio(monkeypatch)  # a second setup computes no features and reads no audio header
    again = make_datamodule(manifest, tmp_path, precompute=precompute, spec_augment=None)
    assert len(again.datasets["test"]) == 3
    for split in SPLITS:
        assert again.datasets[split].lengths().tolist() == first.datasets[split].lengths().tolist()
    if precompute:
        assert torch.equal(again.datasets["val"][1]["src"], first.datasets["val"][1]["src"])


def test_without_precompute_each_step_reads_the_audio(manifest, tmp_path, monkeypatch):
    datamodule = make_datamodule(manifest, tmp_path, precompute=False, cache_dir=None, spec_augment=None)
    assert "features" not in datamodule.encoded["test"].column_names  # only the sizes are stored
    cached = make_datamodule(manifest, tmp_path)
    assert datamodule.datasets["test"].lengths().tolist() == cached.datasets["test"].lengths().tolist()
    assert torch.allclose(datamodule.datasets["test"][0]["src"], cached.datasets["test"][0]["src"], atol=1e-2)
    no_audio(monkeypatch)
    with pytest.raises(AssertionError, match="audio read again"):
        datamodule.datasets["test"][0]


def test_without_precompute_durations_come_from_the_audio_headers(manifest, tmp_path):
    class Untimed:
        """Utterances without durations, as LibriSpeech and Tux Paint give them."""

        def splits(self):
            return {name: [replace(u, duration=None) for u in utts] for name, utts in manifest.splits().items()}

    datamodule = make_datamodule(Untimed(), tmp_path, precompute=False, cache_dir=None)
    assert datamodule.dropped == 1  # the 3.5 s utterance, known from its header
    cached = make_datamodule(manifest, tmp_path)
    assert datamodule.datasets["train"].lengths().tolist() == cached.datasets["train"].lengths().tolist()


def test_corrupt_audio_is_skipped_and_counted(manifest, tmp_path, caplog):
    broken = tmp_path / "audio" / "train_1.wav"
    broken.write_bytes(b"RIFF not really a wave file")
    (tmp_path / "audio" / "train_3.wav").unlink()
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        datamodule = make_datamodule(manifest, tmp_path, cache_dir=None)
    assert len(datamodule.datasets["train"]) == 5  # two unreadable, one too long
    assert "train_1" in caplog.text and "train_3" in caplog.text and "skipped 2 of 8" in caplog.text
    reasons = datamodule.bad_samples.reasons("train")
    assert reasons["corrupt audio"] == 1 and reasons["missing file"] == 1
    train = datamodule.datasets["train"]
    assert sorted(train[i]["id"] for i in range(len(train))) == [0, 2, 5, 6, 7]  # ids still count every record


def test_no_readable_utterance_is_a_read_error(manifest, tmp_path):
    for utterance in utterances(manifest, "val"):
        open(utterance.path, "wb").close()  # empty files: unreadable
    for _ in range(2):  # prepared, then found in the cache
        with pytest.raises(AudioReadError, match="none of the 2 utterances of the val split could be read"):
            make_datamodule(manifest, tmp_path, max_skip_fraction=1.0)
    from attend.run.context import reported_as_messages

    with pytest.raises(SystemExit) as stopped, reported_as_messages():  # an entry point prints it in one line
        make_datamodule(manifest, tmp_path, max_skip_fraction=1.0)
    assert stopped.value.code == 2


def test_two_workers_prepare_the_same_store(manifest, tmp_path):
    (tmp_path / "audio" / "train_5.wav").write_bytes(b"garbage")
    alone = make_datamodule(manifest, tmp_path, prepare_workers=0, shard_size=2, cache_dir=tmp_path / "alone")
    shared = make_datamodule(manifest, tmp_path, prepare_workers=2, shard_size=2, cache_dir=tmp_path / "shared")
    store = shared.encoded["train"]
    assert len(store.manifest["shards"]) == 4 and len(store.skipped) == 1
    assert store.skipped == alone.encoded["train"].skipped
    assert store.column("row").tolist() == alone.encoded["train"].column("row").tolist()
    assert all(store.buffer("features", r).tobytes() == alone.encoded["train"].buffer("features", r).tobytes()
               for r in range(len(store)))


def test_preparing_here_keeps_the_main_process_threads(manifest, tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        make_datamodule(manifest, tmp_path, prepare_workers=0)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_loader_workers_read_the_store(manifest, tmp_path):
    here = make_datamodule(manifest, tmp_path, spec_augment=None)
    worker = make_datamodule(manifest, tmp_path, spec_augment=None, num_workers=1)
    batches = list(here.val_dataloader()), list(worker.val_dataloader())
    assert len(batches[0]) == len(batches[1]) > 0
    for a, b in zip(*batches, strict=True):
        assert torch.equal(a["src"], b["src"]) and torch.equal(a["src_lengths"], b["src_lengths"])
        assert torch.equal(a["tgt"], b["tgt"])
    dataset = here.datasets["test"]
    loader = DataLoader(dataset, batch_size=3, collate_fn=here.collate(), num_workers=1,
                        multiprocessing_context="spawn")  # the dataset is pickled: the stores travel as folders
    (batch,) = list(loader)
    assert torch.equal(batch["src"], here.collate()([dataset[i] for i in range(3)])["src"])


def test_sentencepiece_units_as_targets(manifest, tmp_path):
    tokenizer = SentencePieceTokenizer(vocab_size=30, model_type="unigram")
    datamodule = make_datamodule(manifest, tmp_path, tokenizer=tokenizer)
    batch = next(iter(datamodule.test_dataloader()))
    assert datamodule.tokenizer.decode(batch["tgt"][0, 1:].tolist()) in TEXTS[2:5]
    assert [datamodule.tokenizer.decode(t) for t in batch["tgt"]] == batch["references"]


def test_audio_files_become_a_batch_and_readable_sources(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path)
    paths = [str(tmp_path / "audio" / "test_0.wav"), str(tmp_path / "audio" / "test_2.wav")]
    batch = datamodule.batch_from_sources(paths)
    assert batch["src"].shape[0] == 2 and batch["sources"] == paths and batch["references"] == ["", ""]
    spectrogram = datamodule.readable_source(batch, 0)
    assert isinstance(spectrogram, Spectrogram) and spectrogram.features.shape == (40, int(batch["src_lengths"][0]))
    assert spectrogram.seconds == pytest.approx(0.7, abs=0.05)
    evaluation = next(iter(datamodule.test_dataloader()))
    stored = datamodule.readable_source(evaluation, 0)
    assert stored.features.shape == (40, int(evaluation["src_lengths"][0]))
    with pytest.raises(AudioReadError, match="nope.wav"):
        datamodule.batch_from_sources([str(tmp_path / "nope.wav")])


def test_tokenizer_travels_in_the_state_dict(manifest, tmp_path):
    datamodule = make_datamodule(manifest, tmp_path)
    state = datamodule.state_dict()
    assert set(state) == {"tgt_tokenizer"}
    fresh = speech_datamodule(manifest, CharTokenizer(), LogMelFrontEnd(n_mels=40))
    assert fresh.state_dict() == {}
    fresh.load_state_dict(state)
    assert fresh.tokenizer.vocab_size == datamodule.tokenizer.vocab_size and fresh.state_dict() == state


def test_audio_shorter_than_a_window_is_a_read_error(tmp_path):
    path = tmp_path / "click.wav"
    sf.write(path, np.zeros(100, dtype=np.float32), 16000)
    with pytest.raises(AudioReadError, match="click.wav.*shorter than one analysis window"):
        compute_features(LogMelFrontEnd(), str(path))


def test_the_store_is_keyed_by_every_front_end_setting(manifest, tmp_path):
    faster = make_datamodule(manifest, tmp_path)
    slower = make_datamodule(manifest, tmp_path, frontend=LogMelFrontEnd(n_mels=40, hop_ms=20.0))
    assert len(encoded_stores(tmp_path)) == 6  # three splits, each for both hops
    assert slower.records["test"].folder == faster.records["test"].folder  # the records are shared
    assert slower.datasets["test"].lengths()[0] < faster.datasets["test"].lengths()[0]
    wider = make_datamodule(manifest, tmp_path, frontend=LogMelFrontEnd(n_mels=24))
    assert len(encoded_stores(tmp_path)) == 9 and wider.datasets["test"][0]["src"].shape[1] == 24
