"""English number words for 0..999,999, as spoken by a text-to-speech engine and written in a transcript."""

from __future__ import annotations

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """``n`` in words without "and" or hyphens: 4207 -> "four thousand two hundred seven", 21 -> "twenty one"."""
    if not 0 <= n <= 999_999:
        raise ValueError(f"number_words covers 0..999999, not {n}")
    if n == 0:
        return "zero"
    thousands, rest = divmod(n, 1000)
    words = [*_below_thousand(thousands), "thousand"] if thousands else []
    return " ".join(words + _below_thousand(rest))


def _below_thousand(n: int) -> list[str]:
    """The words of 1..999 (none for 0)."""
    hundreds, rest = divmod(n, 100)
    words = [ONES[hundreds], "hundred"] if hundreds else []
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words += [TENS[tens]] + ([ONES[ones]] if ones else [])
    elif rest:
        words.append(ONES[rest])
    return words
