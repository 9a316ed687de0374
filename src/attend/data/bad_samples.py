"""What to do with a bad sample (missing, corrupt, empty, undecodable, too long): skip and count it, or stop."""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from attend.data.splitting import SPLITS

log = logging.getLogger("attend.data")

ON_ERROR_CHOICES = ("skip", "raise")
NAMED_PER_STAGE = 10  # skips named one by one in warnings per split and stage; the rest only counted
STAGE_WORDS = {"lines": "reading the text", "files": "reading the files", "length": "by the length limits"}
LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}  # str.splitlines splits there


class DataError(ValueError):
    """Bad data stopped the run; the message names the file, the problem and the option or fix."""


class DatasetMissingError(DataError, FileNotFoundError):
    """A data set's files are not where the config points; the message says how to obtain them."""


class Skipped(NamedTuple):
    """A bad item a source met while reading (an undecodable or empty line, ...): sources yield it in place of the
    record, and the data module counts and reports it (skips are data, not calls on a policy object)."""

    key: str  # the file and line, or the record, that was skipped
    reason: str  # a short category, counted: "empty line", "invalid UTF-8", ...
    problem: str  # the full message


@dataclass(frozen=True)
class Skip:
    """One skipped sample: where it was (split, stage), which file or record, and why."""

    split: str  # "train", "val", "test"
    stage: str  # "lines" (a text line), "files" (an image or audio file) or "length" (over a length limit)
    key: str  # the file, "file:line" or record that was skipped
    reason: str  # a short category, counted: "missing file", "corrupt image", "empty line", ...
    problem: str  # the full message


class BadSamples:
    """The ``data.on_error`` / ``data.max_skip_fraction`` policy: a stage of a split is ``begin``, ``skip`` of each
    bad sample (DataError with ``on_error="raise"``, else recorded and named in a warning), ``end`` (logs the count;
    DataError when the share of the split lost so far exceeds ``max_skip_fraction``). ``splits``: those reported even
    with nothing skipped (a data module's set-up splits)."""

    def __init__(self, on_error: str = "skip", max_skip_fraction: float = 0.1,
                 splits: tuple[str, ...] = SPLITS) -> None:
        if on_error not in ON_ERROR_CHOICES:
            raise ValueError(f"data.on_error must be one of {', '.join(ON_ERROR_CHOICES)}; got {on_error!r}")
        if isinstance(max_skip_fraction, bool) or not 0.0 <= float(max_skip_fraction) <= 1.0:
            raise ValueError(f"data.max_skip_fraction must be a number from 0 to 1 (0: stop at the first skip, 1: "
                             f"never stop); got {max_skip_fraction!r}")
        self.on_error = on_error
        self.max_skip_fraction = float(max_skip_fraction)
        self.splits = splits
        self.skips: list[Skip] = []
        self.counts: Counter = Counter()  # (split, stage) -> skips: counted as they come, not by a scan each time
        self.totals: dict[tuple[str, str], tuple[int, str]] = {}  # (split, stage) -> (samples, unit)

    def begin(self, split: str, stage: str) -> None:
        """Start (or restart) a stage of a split: what an earlier pass over it recorded is forgotten."""
        self.skips = [s for s in self.skips if (s.split, s.stage) != (split, stage)]
        self.counts.pop((split, stage), None)
        self.totals.pop((split, stage), None)

    def skip(self, split: str, stage: str, key: str, reason: str, problem: str) -> None:
        """Record a bad sample and warn (first few by name); with on_error=raise, raise DataError instead."""
        if self.on_error == "raise":
            raise DataError(one_line(f"{key}: {problem} ({reason}, {split} split). Fix or remove it, or set "
                                     "data.on_error=skip to skip such samples"))
        self.skips.append(Skip(split, stage, key, reason, problem))
        self.counts[split, stage] += 1
        if self.count(split, stage) <= NAMED_PER_STAGE:
            log.warning("skipping %s sample %s: %s", split, key, problem)

    def end(self, split: str, stage: str, total: int, unit: str) -> None:
        """Close a stage of ``total`` samples: log what was skipped, stop if the split lost too much."""
        self.totals[(split, stage)] = (total, unit)
        skipped = self.count(split, stage)
        if skipped:
            unnamed = max(0, skipped - NAMED_PER_STAGE)
            more = f"; {unnamed} more not named above" if unnamed else ""
            log.warning("skipped %d of %d %s of the %s split (%s)%s", skipped, total, unit, split,
                        self._reasons_text(split, stage), more)
        if (fraction := self.fraction(split)) > self.max_skip_fraction:
            raise DataError(one_line(self._too_many_message(split, fraction)))

    @property
    def skipped(self) -> dict[str, int]:
        """Skipped samples per split: ``splits`` (zero included) and any other split seen."""
        splits = set(self.splits) | {split for split, _ in self.totals} | {s.split for s in self.skips}
        counts = Counter(s.split for s in self.skips)
        return {split: counts.get(split, 0) for split in sorted(splits, key=_split_rank)}

    def reasons(self, split: str | None = None) -> Counter:
        """How many samples were skipped for each reason, in one split or all."""
        return Counter(s.reason for s in self.skips if split is None or s.split == split)

    def fraction(self, split: str) -> float:
        """The share of the split's samples lost over all its stages: 1 - product of each stage's kept share."""
        kept = [1.0 - self.count(split, stage) / total for (s, stage), (total, _) in self.totals.items()
                if s == split and total > 0]
        return 1.0 - math.prod(kept)

    def summary(self) -> dict[str, float]:
        """Numbers for the run's logs: ``data/skipped_<split>`` and ``data/skip_fraction_<split>``."""
        out: dict[str, float] = {}
        for split, count in self.skipped.items():
            out.update({f"data/skipped_{split}": count, f"data/skip_fraction_{split}": self.fraction(split)})
        return out

    def log_summary(self) -> None:
        """One line per split: how many samples were skipped and why."""
        for split, count in self.skipped.items():
            if count:
                log.warning("data %s: skipped %d samples (%s)", split, count, self._reasons_text(split))
            else:
                log.info("data %s: no samples skipped", split)

    def count(self, split: str, stage: str) -> int:
        """Samples skipped so far in one stage of a split."""
        return self.counts[split, stage]

    def _reasons_text(self, split: str, stage: str | None = None) -> str:
        counts = Counter(s.reason for s in self.skips if s.split == split and (stage is None or s.stage == stage))
        return ", ".join(f"{reason}: {n}" for reason, n in counts.most_common())

    def _too_many_message(self, split: str, fraction: float) -> str:
        stages = "; ".join(f"{self.count(split, stage)} of {total} {unit}, {STAGE_WORDS.get(stage, stage)}"
                           for (s, stage), (total, unit) in self.totals.items()
                           if s == split and self.count(split, stage))
        examples = "; ".join([f"{s.key}: {s.problem}" for s in self.skips if s.split == split][:3])
        return (f"{fraction:.1%} of the {split} split was skipped as bad data ({stages}), more than "
                f"data.max_skip_fraction={self.max_skip_fraction:g}. Most common problems: "
                f"{self._reasons_text(split)}. First skipped: {examples}. Fix the data (or the data set path), raise "
                "the length limits if samples are too long, or raise data.max_skip_fraction (1 never stops) to train "
                "on what is left")


def one_line(message: str) -> str:
    """``message`` with its line breaks escaped: a file name may hold one, and an error stays one line."""
    return message.translate(LINE_BREAKS)


def decode_line(raw: bytes, number: int) -> str | UnicodeDecodeError:
    """Line ``number`` of a UTF-8 file without its end (BOM dropped on line 1); not UTF-8: its UnicodeDecodeError."""
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8", errors="strict").rstrip("\r\n")
    except UnicodeDecodeError as error:
        return error


def _split_rank(split: str) -> tuple[int, str]:
    return (SPLITS.index(split) if split in SPLITS else len(SPLITS), split)
