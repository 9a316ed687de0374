"""German-English sentence pairs from the Ding dictionary (Debian package trans-de-en)."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

from attend.data.bad_samples import DatasetMissingError
from attend.data.splitting import Pair, disjoint_split
from attend.data.text.ding_format import is_sentence as _is_sentence
from attend.data.text.ding_format import parse_ding

log = logging.getLogger("attend.data")

DING_PATH = "/usr/share/trans/de-en"
# bump when the extraction changes, so examples stored from an older one are prepared again
EXTRACTION_VERSION = 2


class DingNotFoundError(DatasetMissingError):
    """The Ding dictionary file is missing."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(f"Ding dictionary not found at {path}. Install it with `apt-get install trans-de-en` "
                         "(Debian/Ubuntu; it provides /usr/share/trans/de-en), e.g. by running `make install` as "
                         "root, or pass path=... to a copy of the file.")


class DingPairs:
    """Full-sentence pairs of the Ding dictionary (``attend.data.text.ding_format``), split once with a seed (about
    17.9k pairs). ``extra_phrases`` adds every other word/phrase pair (~368k) to train only, minus any pair whose
    source or target equals a val/test sentence; ``max_extra_phrases`` keeps a seeded random subset of them."""

    def __init__(self, path: str | os.PathLike = DING_PATH, direction: str = "de-en", seed: int = 1234,
                 n_val: int = 1000, n_test: int = 1000, extra_phrases: bool = False,
                 max_extra_phrases: int | None = None) -> None:
        if direction not in ("de-en", "en-de"):
            raise ValueError(f"direction must be 'de-en' or 'en-de', not {direction!r}")
        self.path = Path(path)
        self.direction = direction
        self.seed = seed
        self.n_val = n_val
        self.n_test = n_test
        self.extra_phrases = extra_phrases
        self.max_extra_phrases = max_extra_phrases

    def splits(self) -> dict[str, list[Pair]]:
        """{"train", "val", "test"} -> (source, target) pairs in the configured direction."""
        if not self.path.is_file():
            raise DingNotFoundError(self.path)
        splits = self.build()
        splits["train"] = self._subsample_phrases(splits["train"])
        if self.direction == "en-de":
            splits = {name: [(en, de) for de, en in pairs] for name, pairs in splits.items()}
        return splits

    def _subsample_phrases(self, train: list[Pair]) -> list[Pair]:
        """Sentences first, then at most ``max_extra_phrases`` phrase pairs chosen with the seed."""
        if not self.extra_phrases or self.max_extra_phrases is None:
            return train
        sentences = [pair for pair in train if _is_sentence(pair[0])]
        phrases = [pair for pair in train if not _is_sentence(pair[0])]
        if len(phrases) <= self.max_extra_phrases:
            return train
        chosen = random.Random(self.seed).sample(range(len(phrases)), self.max_extra_phrases)
        return sentences + [phrases[i] for i in sorted(chosen)]

    def settings(self) -> dict[str, Any]:
        """What the pairs depend on (example-store keys): the dictionary file's identity and every option."""
        stat = self.path.stat()
        return {"version": EXTRACTION_VERSION, "path": str(self.path.resolve()), "size": stat.st_size,
                "mtime_ns": stat.st_mtime_ns, "seed": self.seed, "n_val": self.n_val, "n_test": self.n_test,
                "extra_phrases": self.extra_phrases, "direction": self.direction,
                "max_extra_phrases": self.max_extra_phrases}

    def build(self) -> dict[str, list[Pair]]:
        """Parse the dictionary and split it (German -> English), every phrase pair kept."""
        with open(self.path, encoding="utf-8") as f:
            entries = parse_ding(f)
        splits = disjoint_split(entries.sentences, self.n_val, self.n_test, self.seed)
        log.info("Ding: %d sentence pairs (train %d, val %d, test %d)", len(entries.sentences),
                 *(len(splits[name]) for name in ("train", "val", "test")))
        if self.extra_phrases:
            held_out = {text for name in ("val", "test") for pair in splits[name] for text in pair}
            extra = [p for p in entries.phrases if p[0] not in held_out and p[1] not in held_out]
            splits["train"] = splits["train"] + extra
            log.info("Ding: %d word/phrase pairs added to train", len(extra))
        return splits

