"""The data pipeline's contract, the same for every modality (text, images, audio): what ``DataModule`` promises
whatever its plug-in. Damaged store files are rebuilt: data/test_cache_repair.py, over the same data. Modality
specifics are in data/text/test_text_datamodule.py, data/images/test_image_datamodule.py and
data/audio/test_audio_datamodule.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import attend.data.audio.modality as audio_modality
from attend.data import DataModule
from attend.data.bad_samples import DataError
from tests.helpers.contract_data import MODALITIES, build


@pytest.fixture(params=MODALITIES)
def modality(request) -> str:
    return request.param


def started(datamodule: DataModule) -> DataModule:
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def batches(datamodule: DataModule, split: str) -> list[dict]:
    return list(getattr(datamodule, f"{split}_dataloader")())


def test_setup_is_idempotent(modality, tmp_path) -> None:
    datamodule = started(build(modality, tmp_path))
    datasets, skipped = dict(datamodule.datasets), datamodule.skipped
    datamodule.setup("test")
    assert datamodule.datasets == datasets and datamodule.skipped == skipped
    assert datamodule.source.reads  # the first start read the source


def test_a_cached_start_reads_no_source(modality, tmp_path, monkeypatch) -> None:
    first = started(build(modality, tmp_path))
    audio_reads = []
    monkeypatch.setattr(audio_modality, "read_audio", lambda *a, **k: audio_reads.append(a) or 1 / 0)
    second = build(modality, tmp_path)
    for tokenizer in second.tokenizers().values():  # the stores hold the fitted tokenizers: nothing is fitted again
        monkeypatch.setattr(tokenizer, "fit", lambda texts: pytest.fail("a cached start fitted a tokenizer"))
    started(second)
    assert second.source.reads == 0 and not audio_reads
    assert not second.tokenizer.is_fitted or second.state_dict() == first.state_dict()
    for split in ("train", "val", "test"):
        references = [batch["references"] for batch in batches(first, split)]
        assert [batch["references"] for batch in batches(second, split)] == references


def longest_dropped(modality: str, tmp_path: Path) -> tuple[DataModule, int]:
    """A data module without a length limit, and a ``max_target_len`` that leaves out its longest targets."""
    unfiltered = started(build(modality, tmp_path))
    return unfiltered, int(unfiltered.datasets["train"].target_sizes.max()) - 1


def test_skips_are_counted_on_a_cached_start_as_on_the_first(modality, tmp_path, caplog) -> None:
    unfiltered, limit = longest_dropped(modality, tmp_path)
    long = int((unfiltered.datasets["train"].target_sizes > limit).sum())
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        first = started(build(modality, tmp_path, cache="other", max_target_len=limit))
    assert "corpus.txt:2" in caplog.text and "line 2 of corpus.txt is empty" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        second = started(build(modality, tmp_path, cache="other", max_target_len=limit))
    assert "corpus.txt:2" in caplog.text and second.source.reads == 0
    assert second.skipped == first.skipped and first.skipped["train"] == 1 + long  # the bad line and the long ones
    assert first.bad_samples.reasons("train") == second.bad_samples.reasons("train")
    assert second.skip_summary() == first.skip_summary()


def test_too_many_skips_stop_the_run_on_a_cached_start_too(modality, tmp_path) -> None:
    started(build(modality, tmp_path))
    with pytest.raises(DataError, match="max_skip_fraction"):
        started(build(modality, tmp_path, max_skip_fraction=0.0))
    with pytest.raises(DataError, match="corpus.txt:2"):
        started(build(modality, tmp_path, on_error="raise"))


def test_the_length_filter_drops_long_training_examples_only(modality, tmp_path) -> None:
    unfiltered, limit = longest_dropped(modality, tmp_path)
    datamodule = started(build(modality, tmp_path, max_target_len=limit))
    train = unfiltered.datasets["train"]
    long = int((train.target_sizes > limit).sum())
    assert long >= 1 and datamodule.dropped == long
    assert len(datamodule.datasets["train"]) == len(train) - long
    assert (datamodule.datasets["train"].target_sizes <= limit).all()
    for split in ("val", "test"):
        assert len(datamodule.datasets[split]) == len(unfiltered.datasets[split])
    assert datamodule.bad_samples.reasons("train")["target over max_target_len"] == long


def test_evaluation_loaders_are_sorted_complete_and_the_same_every_time(modality, tmp_path) -> None:
    datamodule = started(build(modality, tmp_path))
    for split in ("val", "test"):
        dataset = datamodule.datasets[split]
        seen = [batch["ids"].tolist() for batch in batches(datamodule, split)]
        assert sorted(i for ids in seen for i in ids) == sorted(dataset[i]["id"] for i in range(len(dataset)))
        lengths = [max(int(b["tgt_lengths"].max()), int(b["src_lengths"].max()) if "src_lengths" in b else 0)
                   for b in batches(datamodule, split)]
        assert lengths == sorted(lengths)
        assert [batch["ids"].tolist() for batch in batches(datamodule, split)] == seen


def test_a_checkpoint_s_tokenizers_reuse_the_stores_training_prepared(modality, tmp_path, monkeypatch) -> None:
    trained = started(build(modality, tmp_path))
    evaluating = build(modality, tmp_path)
    evaluating.load_state_dict(trained.state_dict())
    monkeypatch.setattr(type(evaluating.plugin), "encode", lambda *a: pytest.fail("encoded again"))
    started(evaluating)
    assert {s: e.folder for s, e in evaluating.encoded.items()} == {s: e.folder for s, e in trained.encoded.items()}
    assert evaluating.source.reads == 0


def test_every_batch_has_the_shared_fields(modality, tmp_path) -> None:
    datamodule = started(build(modality, tmp_path))
    batch = next(iter(datamodule.train_dataloader()))
    tokenizer = datamodule.tokenizer
    for row in range(batch["tgt"].shape[0]):
        length = int(batch["tgt_lengths"][row])
        assert batch["tgt"][row, 0] == tokenizer.bos_id and batch["tgt"][row, length - 1] == tokenizer.eos_id
        assert (batch["tgt"][row, length:] == tokenizer.pad_id).all()
    assert len(batch["sources"]) == len(batch["references"]) == batch["ids"].shape[0] == batch["src"].shape[0]
    assert batch["num_target_tokens"] == int((batch["tgt_lengths"] - 1).sum())
    assert datamodule.example_batch(2)["tgt"].shape[0] == 2


def test_max_tokens_caps_every_training_batch_of_every_modality(modality, tmp_path) -> None:
    unlimited = started(build(modality, tmp_path))
    lengths = unlimited.datasets["train"].lengths()
    cap = int(lengths.max()) * 2  # room for two of the longest: batches of the short ones hold more
    datamodule = started(build(modality, tmp_path, max_tokens=cap, batch_size=64))
    sizes = []
    for batch in batches(datamodule, "train"):
        longest = batch["tgt_lengths"].max()
        if "src_lengths" in batch:
            longest = max(longest, batch["src_lengths"].max())
        assert len(batch["ids"]) * int(longest) <= cap or len(batch["ids"]) == 1
        sizes.append(len(batch["ids"]))
    assert sum(sizes) == len(datamodule.datasets["train"]) and max(sizes) > 2  # every example, short ones together
