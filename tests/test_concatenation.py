"""data.concatenate: training examples made of several training utterances back to back (features along time,
transcripts joined by a space), within the length limits; evaluation splits and other modalities untouched."""

from __future__ import annotations

import pytest
import torch

from attend.data import Concatenation, ParallelText
from attend.data.concatenated import ConcatenatedExamples
from tests.data_modules import text_datamodule
from tests.test_data_audio import make_datamodule, sample_manifest


def joined_datamodule(tmp_path, max_source_len: int = 300, **concatenate):
    options = {"fraction": 1.0, "min_parts": 2, "max_parts": 3, **concatenate}
    return make_datamodule(sample_manifest(tmp_path), tmp_path, spec_augment=None, concatenate=options,
                           max_source_len=max_source_len)


def test_a_joined_example_is_its_parts_back_to_back(tmp_path):
    datamodule = joined_datamodule(tmp_path)
    train = datamodule.datasets["train"]
    assert isinstance(train, ConcatenatedExamples)
    base = train.base
    assert len(train) == 2 * len(base) == 14  # fraction 1: as many joined examples as the 7 kept utterances
    for index, group in enumerate(train.groups):
        joined = train[len(base) + index]
        parts = [base[i] for i in group]
        assert torch.equal(joined["src"], torch.cat([part["src"] for part in parts]))  # no SpecAugment here
        reference = " ".join(part["reference"] for part in parts)
        assert joined["reference"] == reference
        assert joined["tgt"] == datamodule.tokenizer.encode(reference)
        assert joined["source"] == " + ".join(part["source"] for part in parts)
    assert all(train[i]["reference"] == base[i]["reference"] for i in range(len(base)))  # the originals first
    assert {len(group) for group in train.groups} <= {1, 2, 3}
    batch = next(iter(datamodule.train_dataloader()))  # joined examples collate as any other
    assert batch["src"].dim() == 3 and batch["tgt"][:, 0].eq(datamodule.tokenizer.bos_id).all()


def test_joined_examples_stay_within_max_source_len_and_the_lengths_cover_them(tmp_path):
    datamodule = joined_datamodule(tmp_path, max_source_len=200, min_parts=3, max_parts=3)
    train = datamodule.datasets["train"]
    sizes = train.base.source_sizes()  # 40 to 120 frames each
    assert all(sizes[group].sum() <= 200 for group in train.groups)
    assert any(len(group) < 3 for group in train.groups)  # three parts do not always fit in 200 frames
    lengths = train.lengths()
    assert len(lengths) == len(train)
    assert lengths[len(train.base):].tolist() == [int(train.base.lengths()[g].sum()) + len(g) - 1
                                                  for g in train.groups]


def test_the_draw_is_seeded_and_evaluation_splits_are_not_joined(tmp_path):
    first = joined_datamodule(tmp_path).datasets["train"].groups
    again = joined_datamodule(tmp_path)
    assert again.datasets["train"].groups == first
    assert len(again.datasets["val"]) == 2 and len(again.datasets["test"]) == 3


def test_fraction_zero_leaves_the_training_split_as_it_is(tmp_path):
    datamodule = make_datamodule(sample_manifest(tmp_path), tmp_path, spec_augment=None)
    assert not isinstance(datamodule.datasets["train"], ConcatenatedExamples)


@pytest.mark.parametrize(("options", "problem"), [
    ({"fraction": -0.1}, "fraction must be >= 0"),
    ({"fraction": 0.5, "min_parts": 1}, "2 <= min_parts <= max_parts"),
    ({"fraction": 0.5, "min_parts": 4, "max_parts": 3}, "2 <= min_parts <= max_parts"),
])
def test_bad_options_name_the_setting(options, problem):
    with pytest.raises(ValueError, match=problem):
        Concatenation(**options)


def test_only_speech_can_be_joined(tmp_path):
    with pytest.raises(ValueError, match="data.concatenate joins speech utterances.*fraction=0"):
        text_datamodule(ParallelText(tmp_path), concatenate={"fraction": 0.5})  # refused before reading any file
