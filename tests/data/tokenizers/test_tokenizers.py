"""Tokenizers: round trips, special ids, fitting on train only, state; SentencePiece trained in memory."""

from __future__ import annotations

import hashlib
import io
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attend.data import CharTokenizer, SentencePieceTokenizer, WordTokenizer, tokenizer_from_state
from attend.data.text.parallel_text import read_lines
from attend.data.tokenizers.sentencepiece import reservoir_sample
from tests.helpers.paths import FIXTURES

TRAIN_EN = read_lines(FIXTURES / "multi30k" / "train.en")
TRAIN_DE = read_lines(FIXTURES / "multi30k" / "train.de")

SENTENCES = [
    "A man rides a bicycle on the street.",
    "Don't panic: it's only 3.5 km, isn't it?",
    'He said "hello" (twice) and left...',
    "Sie sagte: „Ich komme morgen.“ Wirklich?",
    "Das kostet 1,000 Euro, z.B. für Ein- und Ausgang.",
    "I’ve made one or two modifications to the original design!",
    "Wie stehen die Chancen, dass …?",
    "On 17 September 1806, the war was a done deal; sb.’s deal.",
]


def spm(**kwargs) -> SentencePieceTokenizer:
    return SentencePieceTokenizer(**{"vocab_size": 120, "hard_vocab_limit": False, **kwargs})


def fitted(kind: str, texts: list[str]):
    tokenizer = {"word": WordTokenizer, "char": CharTokenizer}.get(kind, spm)()
    tokenizer.fit(texts)
    return tokenizer


@pytest.mark.parametrize("kind", ["word", "char", "spm"])
def test_round_trip(kind: str) -> None:
    texts = SENTENCES + TRAIN_EN + TRAIN_DE
    tokenizer = fitted(kind, texts)
    for text in texts:
        ids = tokenizer.encode(text)
        assert all(isinstance(i, int) and 3 < i < tokenizer.vocab_size for i in ids), text
        assert tokenizer.decode(ids) == text


@pytest.mark.parametrize("kind", ["word", "char", "spm"])
def test_special_ids_and_decode_stops_at_eos(kind: str) -> None:
    tokenizer = fitted(kind, TRAIN_EN)
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    ids = tokenizer.encode("A man reads.")
    padded = torch.tensor([1, *ids, 2, *tokenizer.encode("A dog."), 0, 0])
    assert tokenizer.decode(padded) == "A man reads."
    assert tokenizer.decode([1, *ids, 0, 0]) == "A man reads."
    pieces = tokenizer.tokens([1, *ids, 2])
    assert pieces[0] == "<s>" and pieces[-1] == "</s>" and len(pieces) == len(ids) + 2
    assert all(isinstance(p, str) and p for p in pieces)


def test_word_vocabulary_from_train_only_and_pruning() -> None:
    tokenizer = WordTokenizer()
    tokenizer.fit(TRAIN_EN)
    assert tokenizer.encode("A giraffe eats.")[1] == tokenizer.unk_id  # "giraffe" is only in test
    assert tokenizer.tokens(tokenizer.encode("A man.")) == ["A", "man", "."]
    pruned = WordTokenizer(min_freq=3)
    pruned.fit(TRAIN_EN)
    assert pruned.encode("bicycle") == [pruned.unk_id] and pruned.encode("man") != [pruned.unk_id]
    small = WordTokenizer(max_size=10)
    small.fit(TRAIN_EN)
    assert small.vocab_size == 10


def test_lowercase_and_char_pieces() -> None:
    tokenizer = WordTokenizer(lowercase=True)
    tokenizer.fit(["The Dog barks."])
    assert tokenizer.encode("the dog") == tokenizer.encode("THE DOG")
    assert tokenizer.decode(tokenizer.encode("The Dog barks.")) == "the dog barks."
    chars = CharTokenizer()
    chars.fit(["a b"])
    assert chars.tokens(chars.encode("a b")) == ["a", "␣", "b"]
    assert chars.encode("c") == [chars.unk_id]


@pytest.mark.parametrize("kind", ["word", "char", "spm"])
def test_state_round_trip_through_torch_save(kind: str) -> None:
    tokenizer = fitted(kind, TRAIN_EN)
    buffer = io.BytesIO()
    torch.save(tokenizer.state_dict(), buffer)
    buffer.seek(0)
    rebuilt = tokenizer_from_state(torch.load(buffer, weights_only=True))
    assert type(rebuilt) is type(tokenizer) and rebuilt.vocab_size == tokenizer.vocab_size
    for text in TRAIN_EN[:5] + ["A giraffe eats leaves."]:
        assert rebuilt.encode(text) == tokenizer.encode(text)
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.encode(TRAIN_EN[0]) == tokenizer.encode(TRAIN_EN[0])


def test_unfitted_tokenizer_raises() -> None:
    with pytest.raises(RuntimeError, match="not fitted"):
        WordTokenizer().encode("a")
    with pytest.raises(RuntimeError, match="not fitted"):
        SentencePieceTokenizer().state_dict()


def test_sentencepiece_fits_in_memory_and_a_second_fit_gives_the_same_state(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a relative cache folder would go
    first = spm()
    first.fit(TRAIN_EN)
    assert first.tokens([0, 1, 2, 3]) == ["<pad>", "<s>", "</s>", "<unk>"]
    second = spm()
    second.fit(iter(TRAIN_EN))  # a stream, read once
    assert second.state_dict() == first.state_dict()
    assert [second.encode(text) for text in TRAIN_EN] == [first.encode(text) for text in TRAIN_EN]
    other_text, other_settings = spm(), spm(model_type="bpe")
    other_text.fit(TRAIN_EN[:-1])
    other_settings.fit(TRAIN_EN)
    states = [t.state_dict()["fitted"]["model_proto"] for t in (first, other_text, other_settings)]
    assert len(set(states)) == 3
    assert not list(tmp_path.iterdir())  # no model file anywhere: the bytes live in state_dict()
    assert not hasattr(first, "cache_dir") and not hasattr(first, "model_path")


SAMPLED_FIT = """
import hashlib, sys
from attend.data import SentencePieceTokenizer
texts = sys.stdin.read().splitlines()
tokenizer = SentencePieceTokenizer(vocab_size=120, hard_vocab_limit=False, num_threads=1, max_sentences=101)
tokenizer.fit(texts)
print(hashlib.sha1(tokenizer.model_proto).hexdigest())
"""


def test_a_sampled_fit_is_the_same_in_another_process() -> None:
    """A corpus over max_sentences trains on a seeded sample: the same model in every process (SentencePiece's own
    input_sentence_size sampling draws a new sample in each process, whatever seed it is given)."""
    texts = TRAIN_EN + TRAIN_DE + SENTENCES * 6  # 110 sentences
    here = SentencePieceTokenizer(vocab_size=120, hard_vocab_limit=False, num_threads=1, max_sentences=101)
    here.fit(texts)
    there = subprocess.run([sys.executable, "-c", SAMPLED_FIT], input="\n".join(texts), capture_output=True,
                           text=True, check=True).stdout.strip()
    assert there == hashlib.sha1(here.model_proto).hexdigest()


def test_reservoir_sample_is_seeded_and_keeps_a_short_stream_whole() -> None:
    items = [f"line {i}" for i in range(1000)]
    sample, count = reservoir_sample(iter(items), 50, seed=0)
    assert count == 1000 and len(sample) == 50 and len(set(sample)) == 50 and set(sample) <= set(items)
    assert reservoir_sample(iter(items), 50, seed=0) == (sample, count)
    assert reservoir_sample(iter(items), 50, seed=1)[0] != sample
    assert max(int(item.split()[1]) for item in sample) > 500  # the whole stream is drawn from, not its head
    assert reservoir_sample(iter(items[:40]), 50, seed=0) == (items[:40], 40)
