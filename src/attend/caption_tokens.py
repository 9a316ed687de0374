"""The words of a caption as the caption metrics compare them; below both data and metrics, which share it."""

from __future__ import annotations

import re

WORD_RE = re.compile(r"\w+(?:['’]\w+)*")


def caption_tokens(text: str) -> list[str]:
    """Lower-cased words without punctuation, as the COCO caption evaluation compares them."""
    return WORD_RE.findall(text.lower())
