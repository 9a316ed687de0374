"""Which evaluation examples are new: none of their references occurs verbatim among the training captions."""

from __future__ import annotations

from collections.abc import Iterable

from attend.caption_tokens import caption_tokens


def normalise(caption: str) -> str:
    """A caption as the caption metrics compare it: lower case, punctuation dropped, words joined by spaces."""
    return " ".join(caption_tokens(caption))


def caption_set(captions: Iterable[str]) -> frozenset[str]:
    """The normalised captions (what an evaluation caption is looked up in)."""
    return frozenset(normalise(caption) for caption in captions)


def is_unseen(references: Iterable[str], training: frozenset[str]) -> bool:
    """True when no reference, normalised, is one of the ``training`` captions (a model cannot have memorised it)."""
    return not any(normalise(reference) in training for reference in references)
