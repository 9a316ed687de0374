"""Subword sampling (data.subword_sampling): training pairs segmented anew at random, the text unchanged; validation
and test keep the stored best segmentation; a tokenizer that cannot sample is refused before any data is prepared."""

from __future__ import annotations

import pytest

from attend.config.errors import ConfigError
from attend.data import ParallelText, SentencePieceTokenizer, WordTokenizer
from attend.data.tokenizers.sampling import SubwordSampler
from tests.helpers.datamodules import text_datamodule
from tests.helpers.paths import MULTI30K

TRAIN_EN = (MULTI30K / "train.en").read_text().splitlines()


def spm(model_type: str = "unigram") -> SentencePieceTokenizer:
    tokenizer = SentencePieceTokenizer(vocab_size=150, hard_vocab_limit=False, model_type=model_type)
    tokenizer.fit(TRAIN_EN)
    return tokenizer


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_sampled_segmentations_vary_and_spell_the_same_text(model_type: str) -> None:
    tokenizer = spm(model_type)
    sampler = SubwordSampler(0.1 if model_type == "unigram" else 0.3, tokenizer)
    text = TRAIN_EN[0]
    best = tokenizer.encode(text)
    draws = [sampler.target(text, best) for _ in range(30)]
    assert all(tokenizer.decode(ids) == text for ids in draws)
    assert len({tuple(ids) for ids in draws}) > 3  # many segmentations of one sentence
    assert any(len(ids) > len(best) for ids in draws)  # finer pieces than the best segmentation


def test_a_sample_over_the_length_limit_falls_back_to_the_best_segmentation() -> None:
    tokenizer = spm()
    text = TRAIN_EN[0]
    best = tokenizer.encode(text)
    sampler = SubwordSampler(0.01, tokenizer, max_target_len=len(best))
    assert all(len(sampler.target(text, best)) <= len(best) for _ in range(20))


def test_settings_that_cannot_sample_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"data.subword_sampling must be in \(0, 1\]"):
        SubwordSampler(0.0, spm())
    with pytest.raises(ConfigError, match="data.tokenizer is a WordTokenizer: use attend.data.SentencePieceTokenizer"):
        SubwordSampler(0.1, WordTokenizer())
    with pytest.raises(ConfigError, match="source's tokenizer is a WordTokenizer"):
        text_datamodule(ParallelText(MULTI30K), WordTokenizer(), spm(), subword_sampling=0.1)


def test_training_pairs_are_segmented_anew_and_evaluation_pairs_are_not(tmp_path) -> None:
    dm = text_datamodule(ParallelText(MULTI30K), SentencePieceTokenizer(vocab_size=150, hard_vocab_limit=False),
                         SentencePieceTokenizer(vocab_size=150, hard_vocab_limit=False), subword_sampling=0.1,
                         cache_dir=tmp_path)
    dm.setup()
    train, val = dm.datasets["train"], dm.datasets["val"]
    draws = [train[0] for _ in range(20)]
    assert len({tuple(d["tgt"]) for d in draws}) > 1 and len({tuple(d["src"]) for d in draws}) > 1
    assert {dm.tokenizer.decode(d["tgt"]) for d in draws} == {draws[0]["reference"]}
    assert {dm.plugin.tokenizer.decode(d["src"]) for d in draws} == {draws[0]["source"]}
    stored = [tuple(val[0]["tgt"]) for _ in range(5)]
    assert stored == [tuple(dm.tokenizer.encode(val[0]["reference"]))] * 5
