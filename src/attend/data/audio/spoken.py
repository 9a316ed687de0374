"""A written transcript as it is spoken: notes left out, numbers and ordinals in the language's words, then
``normalize_transcript``. Shared by the real-speech sources whose transcripts are written for people (Asterisk's
prompts, the game's dialogue)."""

from __future__ import annotations

import re

from num2words import num2words

from attend.data.audio.record import normalize_transcript

# "[beep]", "(10 seconds of silence)", "<beep ascending>", "(note: does not say "2")": written, not spoken
NOTES = re.compile(r"\[[^\]]*\]|\([^)]*\)|<[^>]*>")
# the separators of thousands in each language ("1,000" in English; "1.000" or "1 000" with a no-break space in
# French): "." or "," before a group that is not exactly three digits marks a fraction ("28.8" / "28,8"). A plain
# space does not join numbers ("dial 500 600" is two).
THOUSANDS = {"en": ","}
DEFAULT_THOUSANDS = ".\u00a0\u202f"
# ordinal suffixes written after the digits, by language ("1st", "1er", "2e", "1º")
ORDINALS = {"en": "st|nd|rd|th", "fr": "ère|ème|eme|er|re|e", "es": "º|ª", "it": "º|ª|°"}
# the feminine "1re" / "1ère" (num2words writes the masculine "premier")
FEMININE_FIRST = {"fr": "première"}


def spoken_text(text: str, language: str) -> str:
    """The transcript as spoken: notes in brackets, parentheses or angle brackets dropped, numbers in words
    (``28.8`` -> twenty-eight point eight, ``1,000`` -> one thousand, ``1st`` -> first, ``1er`` -> premier), then
    ``normalize_transcript`` (lowercase, no punctuation). Empty when the text was only notes."""
    text = NOTES.sub(" ", text)
    text = number_pattern(language).sub(lambda m: f" {number_match_in_words(m, language)} ", text)
    return normalize_transcript(text)


def is_only_notes(text: str) -> bool:
    """True when nothing but notes (and punctuation) is written: a tone, a silence, a stage direction."""
    return not normalize_transcript(NOTES.sub(" ", text))


def number_pattern(language: str) -> re.Pattern:
    """A number in ``language``'s writing: digits with thousands groups or a fraction, and an ordinal suffix."""
    thousands = f"[{re.escape(THOUSANDS.get(language, DEFAULT_THOUSANDS))}]"
    ordinal = ORDINALS.get(language)
    suffix = rf"(?P<ordinal>{ordinal})\b" if ordinal else r"(?P<ordinal>(?!))"
    return re.compile(rf"(?P<number>\d{{1,3}}(?:{thousands}\d{{3}})+(?![\d])|\d+(?:[.,]\d+)?)(?:{suffix})?")


def number_match_in_words(match: re.Match, language: str) -> str:
    """The words of one ``number_pattern`` match: a cardinal, a decimal or an ordinal."""
    written, ordinal = match.group("number"), match.group("ordinal")
    thousands = f"[{re.escape(THOUSANDS.get(language, DEFAULT_THOUSANDS))}]"
    if re.fullmatch(rf"\d{{1,3}}(?:{thousands}\d{{3}})+", written):
        written = re.sub(thousands, "", written)
    if ordinal and written.isdigit():
        if int(written) == 1 and ordinal in ("re", "ère") and language in FEMININE_FIRST:
            return FEMININE_FIRST[language]
        return num2words(int(written), lang=language, to="ordinal")
    return number_in_words(written, language)


def number_in_words(number: str, language: str) -> str:
    """A number without thousands separators (``5``, ``28.8``, ``28,8``) in ``language``'s words."""
    whole, _, fraction = number.replace(",", ".").partition(".")
    return num2words(float(f"{whole}.{fraction}") if fraction else int(whole), lang=language)
