"""Character tokenizer: one id per character seen in the training text."""

from __future__ import annotations

from attend.data.tokenizers.vocab import VocabTokenizer

SPACE_PIECE = "␣"


class CharTokenizer(VocabTokenizer):
    """Every character of the training text gets an id; unseen characters map to unk."""

    def split(self, text: str) -> list[str]:
        return list(text)

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def _pieces(self, ids: list[int]) -> list[str]:
        return [SPACE_PIECE if p == " " else p for p in self._vocab.pieces(ids)]
