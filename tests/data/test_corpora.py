"""Several corpora in one split (``Corpora``): the records keep each one's corpus, batches carry it, the data module
logs the examples per corpus and names the corpora."""

from __future__ import annotations

import logging

import pytest

from attend.data import Corpora
from attend.data.audio import JsonlManifest
from attend.data.bad_samples import Skipped
from tests.helpers.audio import TEXTS, make_datamodule, write_manifest


def two_corpora(tmp_path) -> Corpora:
    """"real": the eight-utterance manifest's shape; "synthetic": three, one test; the corpora share no file."""
    real = JsonlManifest(train=write_manifest(tmp_path / "real", "train", [0.5, 0.8, 1.2, 0.6], TEXTS[:4]),
                         val=write_manifest(tmp_path / "real", "val", [0.6, 0.9], TEXTS[:2]),
                         test=write_manifest(tmp_path / "real", "test", [0.7, 0.5], TEXTS[2:4]))
    synthetic = JsonlManifest(train=write_manifest(tmp_path / "synth", "train", [0.4, 0.9], TEXTS[4:6]),
                              val=write_manifest(tmp_path / "synth", "val", [0.5], TEXTS[6:7]),
                              test=write_manifest(tmp_path / "synth", "test", [0.6], TEXTS[7:8]))
    return Corpora({"real": real, "synthetic": synthetic})


def test_each_split_holds_every_corpus_and_batches_say_whose(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="attend.data"):
        datamodule = make_datamodule(two_corpora(tmp_path), tmp_path, spec_augment=None)
    assert datamodule.corpora == ["real", "synthetic"]
    assert datamodule.datasets["train"].corpus_counts() == {"real": 4, "synthetic": 2}
    assert "test examples by corpus: real 2, synthetic 1" in caplog.text
    batch = next(iter(datamodule.test_dataloader()))
    assert sorted(batch["corpus"]) == ["real", "real", "synthetic"]
    by_corpus = dict(zip(batch["references"], batch["corpus"], strict=True))
    assert by_corpus[TEXTS[7]] == "synthetic" and by_corpus[TEXTS[2]] == "real"


def test_a_single_source_has_no_corpora(tmp_path):
    source = JsonlManifest(train=write_manifest(tmp_path / "a", "train", [0.5, 0.6], TEXTS[:2]),
                           val=write_manifest(tmp_path / "a", "val", [0.5], TEXTS[:1]),
                           test=write_manifest(tmp_path / "a", "test", [0.5], TEXTS[:1]))
    datamodule = make_datamodule(source, tmp_path, spec_augment=None)
    assert datamodule.corpora == [] and "corpus" not in next(iter(datamodule.test_dataloader()))


def test_a_cached_start_keeps_the_corpora_and_a_changed_corpus_makes_new_records(tmp_path):
    source = two_corpora(tmp_path)
    first = make_datamodule(source, tmp_path, spec_augment=None)
    again = make_datamodule(source, tmp_path, spec_augment=None)
    assert again.records["train"].folder == first.records["train"].folder and again.corpora == first.corpora
    assert make_datamodule(Corpora({"real": source.sources["real"]}), tmp_path, spec_augment=None).corpora == ["real"]


def test_skipped_items_are_named_with_their_corpus(tmp_path):
    class OneBadLine:
        def splits(self):
            return {"train": [Skipped("f.txt:3", "empty line", "line 3 is empty")], "val": [], "test": []}

    items = list(Corpora({"bad": OneBadLine()}).iter_split("train"))
    assert items == [Skipped("bad/f.txt:3", "empty line", "line 3 is empty")]


def test_image_sources_cannot_be_chained_yet():
    from attend.data import ImageModality

    with pytest.raises(ValueError, match="gives no images"):
        ImageModality(32).bind(Corpora({"a": object()}))
