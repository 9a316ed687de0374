"""Parsing the Ding dictionary format (``German :: English`` per line) into text pairs."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# innermost {} [] () <> annotation: {f} gender, [ugs.] register, (of sth.) usage, <Abk.> variants
ANNOTATION_RE = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|\([^()]*\)|<[^<>]*>")
SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+(?=[.,;:!?](?:\s|$))")
SENTENCE_END = (".", "?", "!")


@dataclass(frozen=True)
class DingEntries:
    """All pairs of one dictionary file: full sentences and other words/phrases."""

    sentences: list[tuple[str, str]]
    phrases: list[tuple[str, str]]


def clean(text: str) -> str:
    """Strip annotations in {} [] () <> (nested ones too), collapse whitespace, and drop a space an annotation
    leaves before final punctuation: ``einmal (hatte ich)!`` becomes ``einmal!``."""
    previous = None
    while previous != text:
        previous, text = text, ANNOTATION_RE.sub(" ", text)
    return SPACE_BEFORE_PUNCT_RE.sub("", " ".join(text.split()))


def is_sentence(german: str) -> bool:
    """A full sentence: ends in . ? or ! and has at least three words."""
    return german.endswith(SENTENCE_END) and len(german.split()) >= 3


def line_pairs(line: str) -> Iterator[tuple[str, str]]:
    """(German, English) of each sub-entry (`` | ``), when both sides have as many: the first alternative (``; ``)
    of each side, as alternatives are usually not parallel."""
    line = line.rstrip("\n")
    if not line.strip() or line.startswith("#") or " :: " not in line:
        return
    german, english = line.split(" :: ", 1)
    german_subs, english_subs = german.split(" | "), english.split(" | ")
    if len(german_subs) != len(english_subs):
        return
    for de, en in zip(german_subs, english_subs, strict=True):
        de_first, en_first = _first_alternative(de), _first_alternative(en)
        if de_first and en_first:
            yield de_first, en_first


def _first_alternative(sub_entry: str) -> str:
    return next((cleaned for cleaned in map(clean, sub_entry.split("; ")) if cleaned), "")


def parse_ding(lines: Iterable[str]) -> DingEntries:
    """Sentence pairs and other pairs, de-duplicated, in file order; sentences holding ``/`` are inline
    alternatives (``He / It is...``) with no single reading, left out of both lists."""
    sentences: dict[tuple[str, str], None] = {}
    phrases: dict[tuple[str, str], None] = {}
    for line in lines:
        for pair in line_pairs(line):
            if not is_sentence(pair[0]):
                phrases[pair] = None
            elif "/" not in pair[0] and "/" not in pair[1]:
                sentences[pair] = None
    return DingEntries(sentences=list(sentences), phrases=list(phrases))
