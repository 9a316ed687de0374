"""Word tokenizer: words and punctuation split by a regex, reattached on decode."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from attend.data.tokenizers.vocab import Vocab, VocabTokenizer

# a word keeps inner apostrophes, hyphens and number separators (don't, A-Dur, 3.5, 1,000, 10:30, z.B, sb.’s) and a
# trailing hyphen of a truncated compound (Ein- und Ausgang); any other symbol is a token of its own
TOKEN_RE = re.compile(r"\.{2,}|\w+(?:['’\-.,:/]\w+|\.’s\b)*(?:-(?!\w))?|\S")
NO_SPACE_BEFORE = frozenset(".,;:!?)]}%")
NO_SPACE_AFTER = frozenset("([{¿¡$£#")
# opening quote -> the quote that closes it (German „…“ ‚…‘ »…«, English “…” ‘…’, French «…»)
QUOTE_CLOSERS = {'"': '"', "'": "'", "„": "“", "“": "”", "‚": "‘", "‘": "’", "«": "»", "»": "«", "‹": "›"}


def split_words(text: str) -> list[str]:
    """Words and punctuation marks of ``text``."""
    return TOKEN_RE.findall(text)


def join_words(tokens: list[str]) -> str:
    """Inverse of ``split_words`` for ordinarily spaced text: punctuation and quotes reattached."""
    out: list[str] = []
    open_quotes: list[str] = []
    glue_next = True  # no space before the first token
    for token in tokens:
        glue, glue_after = _spacing(token, open_quotes)
        if out and not (glue or glue_next):
            out.append(" ")
        out.append(token)
        glue_next = glue_after
    return "".join(out)


def _spacing(token: str, open_quotes: list[str]) -> tuple[bool, bool]:
    """(no space before, no space after) for ``token``; updates the stack of open quotes."""
    if token in QUOTE_CLOSERS or token in QUOTE_CLOSERS.values():
        if open_quotes and token == QUOTE_CLOSERS[open_quotes[-1]]:
            open_quotes.pop()
            return True, False
        if token in QUOTE_CLOSERS:
            open_quotes.append(token)
            return False, True
        return True, False  # a closer nothing opened, e.g. the possessive in "parents’"
    if token in NO_SPACE_BEFORE or token.startswith(".."):
        return True, False
    return False, token in NO_SPACE_AFTER


class WordTokenizer(VocabTokenizer):
    """Word-level vocabulary; ``min_freq`` and ``max_size`` (specials included) prune rare words."""

    def __init__(self, lowercase: bool = False, min_freq: int = 1, max_size: int | None = None) -> None:
        super().__init__(lowercase=lowercase)
        self.min_freq = min_freq
        self.max_size = max_size

    def split(self, text: str) -> list[str]:
        return split_words(text)

    def join(self, tokens: list[str]) -> str:
        return join_words(tokens)

    def _build(self, counts: Counter[str]) -> Vocab:
        return Vocab.build(counts, min_freq=self.min_freq, max_size=self.max_size)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "min_freq": self.min_freq, "max_size": self.max_size}
