"""A token <-> id table with the four specials first, shared by the word and char tokenizers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from attend.data.tokenizers.tokenizer import SPECIAL_TOKENS, UNK_ID, Tokenizer


class Vocab:
    """Ids 0..3 are pad/bos/eos/unk; then tokens by descending frequency (ties: first seen)."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self.itos: list[str] = list(SPECIAL_TOKENS) + [t for t in tokens if t not in SPECIAL_TOKENS]
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(cls, counts: Counter[str], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """Keep tokens seen at least ``min_freq`` times, at most ``max_size`` ids in all."""
        kept = [t for t, c in counts.most_common() if c >= min_freq]
        if max_size is not None:
            kept = kept[: max(0, max_size - len(SPECIAL_TOKENS))]
        return cls(kept)

    def __len__(self) -> int:
        return len(self.itos)

    def lookup(self, tokens: Iterable[str]) -> list[int]:
        return [self.stoi.get(t, UNK_ID) for t in tokens]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] if 0 <= i < len(self.itos) else SPECIAL_TOKENS[UNK_ID] for i in ids]


class VocabTokenizer(Tokenizer):
    """A tokenizer whose ids come from a ``Vocab`` over the strings ``split`` returns."""

    def __init__(self, lowercase: bool = False) -> None:
        super().__init__(lowercase=lowercase)
        self.vocab: Vocab | None = None

    def split(self, text: str) -> list[str]:
        """The token strings of ``text`` (already normalized)."""
        raise NotImplementedError

    def join(self, tokens: list[str]) -> str:
        """Inverse of ``split``."""
        raise NotImplementedError

    def _build(self, counts: Counter[str]) -> Vocab:
        return Vocab.build(counts)

    @property
    def is_fitted(self) -> bool:
        return self.vocab is not None

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def _vocab(self) -> Vocab:
        if self.vocab is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit(train_texts) first")
        return self.vocab

    def fit(self, texts: Iterable[str]) -> None:
        self.vocab = self._build(Counter(token for text in texts for token in self.split(self.normalize(text))))

    def encode(self, text: str) -> list[int]:
        return self._vocab.lookup(self.split(self.normalize(text)))

    def _decode_clean(self, ids: list[int]) -> str:
        return self.join(self._vocab.pieces(ids))

    def _pieces(self, ids: list[int]) -> list[str]:
        return self._vocab.pieces(ids)

    def _fitted_state(self) -> dict[str, Any]:
        return {"itos": list(self._vocab.itos)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.vocab = Vocab(state["itos"][len(SPECIAL_TOKENS) :])
