"""What every metric's ``update`` receives: one decoded evaluation batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attend.search import SearchResult

if TYPE_CHECKING:
    from attend.data.tokenizers.tokenizer import Tokenizer


@dataclass(frozen=True)
class Decoded:
    """One evaluation batch as the model decoded it; every metric is ``update(decoded)`` and reads what it needs.

    Text metrics (BLEU, CER...) read ``hypotheses`` and ``references``; attention metrics read ``batch`` (what
    a data set adds: alignments, objects, object masks) and ``result`` (the search's tokens, weights and grid).
    One contract, so the model updates every metric alike and a new metric chooses its own inputs.
    """

    batch: dict  # the collated batch: "references" always, and whatever the data module adds
    result: SearchResult | None  # the search on it; None in a text view
    hypotheses: list[str]  # the result's texts, as the model decodes them (tokenizer.decode of each sequence)
    tokenizer: Tokenizer | None = None  # the target tokenizer, for output_tokens

    @property
    def references(self) -> list:
        """Each row's reference (a string) or references (a list of strings: captions)."""
        return self.batch["references"]

    def output_tokens(self, row: int) -> list[str]:
        """The readable piece of each output step of ``row``, the end token included: one per step of the weights."""
        ids = self.result.tokens[row, : int(self.result.lengths[row])].tolist()
        return self.tokenizer.tokens(ids)

    @classmethod
    def text(cls, hypotheses: Sequence[str], references: Sequence) -> Decoded:
        """A text view: hypotheses and their references only (``result`` None, no other batch entry).
        Enough for a text metric, not for an attention metric."""
        return cls({"references": list(references)}, None, list(hypotheses))

    def text_rows(self, rows: Sequence[int]) -> Decoded:
        """The text view (see ``text``) of some rows: what a text metric on a subset of the batch reads."""
        return Decoded.text([self.hypotheses[i] for i in rows], [self.references[i] for i in rows])
