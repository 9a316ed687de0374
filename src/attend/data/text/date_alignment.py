"""Which characters of a written date produce each character of its ISO form ``YYYY-MM-DD``: Babel's
``format_date`` is literal text and one ``DateTimeFormat(date, locale)[field]`` per pattern field, so rebuilding it
field by field tells where each field lies (then moved by ``DatePairs``' whitespace normalisation)."""

from __future__ import annotations

import datetime

from babel import Locale
from babel.dates import DateTimeFormat, get_date_format, parse_pattern, tokenize_pattern

Span = tuple[int, int]  # [start, end) character indices of the written date
Piece = tuple[str, str | None]  # (text, the pattern letter that wrote it; None for literal text)

CLDR_STYLES = ("short", "medium", "long", "full")
FIELD_OF_LETTER = {"y": "year", "Y": "year", "u": "year", "M": "month", "L": "month", "d": "day"}
# the date field behind each character of YYYY-MM-DD; the hyphens come from no source character
ISO_FIELDS = ("year",) * 4 + (None,) + ("month",) * 2 + (None,) + ("day",) * 2


def date_pieces(date: datetime.date, format: str, locale: Locale | str) -> list[Piece]:
    """``format_date(date, format, locale)`` as pieces whose texts join to exactly that string."""
    locale = Locale.parse(locale)
    pattern = get_date_format(format, locale=locale) if format in CLDR_STYLES else format
    values = DateTimeFormat(date, locale)
    tokens = tokenize_pattern(parse_pattern(pattern).pattern)  # ("chars", text) or ("field", (letter, count))
    return [(value, None) if kind == "chars" else (values[value[0] * value[1]], value[0]) for kind, value in tokens]


def normalized_positions(text: str) -> list[int | None]:
    """Where each character of ``text`` lands in ``" ".join(text.split())``; whitespace -> None."""
    positions: list[int | None] = []
    length, in_gap = 0, False
    for char in text:
        if char.isspace():  # str.split() splits on exactly these characters
            positions.append(None)
            in_gap = True
            continue
        if in_gap and length > 0:
            length += 1  # the one space that joins two words
        in_gap = False
        positions.append(length)
        length += 1
    return positions


def field_spans(pieces: list[Piece]) -> dict[str, Span]:
    """Span of each date field (year, month, day) in the normalised text, for fields written exactly once (no
    single span says where a field written twice was read)."""
    positions = normalized_positions("".join(text for text, _ in pieces))
    spans: dict[str, list[Span]] = {}
    start = 0
    for text, letter in pieces:
        landed = [p for p in positions[start : start + len(text)] if p is not None]
        start += len(text)
        field = FIELD_OF_LETTER.get(letter or "")
        if field is not None and landed:
            spans.setdefault(field, []).append((landed[0], landed[-1] + 1))
    return {field: found[0] for field, found in spans.items() if len(found) == 1}


def iso_alignment(pieces: list[Piece]) -> list[Span | None]:
    """For each character of ``YYYY-MM-DD``: the span of the written field it comes from, or None."""
    spans = field_spans(pieces)
    return [None if field is None else spans.get(field) for field in ISO_FIELDS]
