"""Tokenizers: round trips, special ids, fitting on train only, state and cache."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest
import torch

from attend.data import CharTokenizer, SentencePieceTokenizer, WordTokenizer, tokenizer_from_state
from attend.data.text.parallel_text import read_lines

FIXTURES = Path(__file__).parent / "fixtures"
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


def spm(tmp_path: Path, **kwargs) -> SentencePieceTokenizer:
    options = {"vocab_size": 120, "hard_vocab_limit": False, "cache_dir": tmp_path, **kwargs}
    return SentencePieceTokenizer(**options)


def fitted(kind: str, tmp_path: Path, texts: list[str]):
    tokenizer = {"word": WordTokenizer, "char": CharTokenizer}.get(kind, lambda: spm(tmp_path))()
    tokenizer.fit(texts)
    return tokenizer


@pytest.mark.parametrize("kind", ["word", "char", "spm"])
def test_round_trip(kind: str, tmp_path: Path) -> None:
    texts = SENTENCES + TRAIN_EN + TRAIN_DE
    tokenizer = fitted(kind, tmp_path, texts)
    for text in texts:
        ids = tokenizer.encode(text)
        assert all(isinstance(i, int) and 3 < i < tokenizer.vocab_size for i in ids), text
        assert tokenizer.decode(ids) == text


@pytest.mark.parametrize("kind", ["word", "char", "spm"])
def test_special_ids_and_decode_stops_at_eos(kind: str, tmp_path: Path) -> None:
    tokenizer = fitted(kind, tmp_path, TRAIN_EN)
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
def test_state_round_trip_through_torch_save(kind: str, tmp_path: Path) -> None:
    tokenizer = fitted(kind, tmp_path, TRAIN_EN)
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


def test_sentencepiece_ids_and_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = spm(tmp_path)
    first.fit(TRAIN_EN)
    assert first.tokens([0, 1, 2, 3]) == ["<pad>", "<s>", "</s>", "<unk>"]
    assert first.model_path is not None and first.model_path.parent == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.model_path.name]

    def no_training(*args, **kwargs):
        raise AssertionError("the cached model should have been reused")

    monkeypatch.setattr(SentencePieceTokenizer, "_train", no_training)
    second = spm(tmp_path)
    second.fit(TRAIN_EN)
    assert second.model_path == first.model_path and second.model_proto == first.model_proto
    monkeypatch.undo()
    other_text, other_settings = spm(tmp_path), spm(tmp_path, model_type="bpe")
    other_text.fit(TRAIN_EN[:-1])
    other_settings.fit(TRAIN_EN)
    assert len({first.model_path, other_text.model_path, other_settings.model_path}) == 3
    assert "bpe" in other_settings.model_path.name
