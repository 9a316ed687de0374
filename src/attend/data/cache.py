"""Cache files outside the example store (Ding pairs, SentencePiece models, the espeak-ng manifest): written
atomically and rebuilt with a warning when found truncated or corrupt; and skips told again on a cached start."""

from __future__ import annotations

import json
import logging
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from attend.data.bad_samples import BadSamples

log = logging.getLogger("attend.data")
T = TypeVar("T")


class CorruptCacheError(ValueError):
    """A cache file that reads but fails a check of its own (a part it must have is missing)."""


# what reading a truncated or overwritten cache file raises: JSON and UTF-8 decoding (ValueError), torch.load
# (RuntimeError from the zip reader, EOFError, pickle.UnpicklingError), SentencePiece (RuntimeError), a missing
# entry (KeyError, IndexError, TypeError), CorruptCacheError, and OSError for a file that cannot be read at all
UNREADABLE = (OSError, EOFError, ValueError, KeyError, IndexError, TypeError, RuntimeError, pickle.UnpicklingError)


def load_or_rebuild(
    path: Path | None,
    load: Callable[[Path], T | None],
    build: Callable[[], T],
    save: Callable[[T, Path], None],
    on_cached: Callable[[T], None] | None = None,
) -> T:
    """``load(path)`` of a cache file, or ``build()`` then ``save(result, path)`` (atomically) when there is none.

    A file that ``load`` cannot read (truncated, overwritten, an entry missing: it raises one of ``UNREADABLE``)
    is named in a warning and rebuilt, never a traceback; ``load`` returns None for a sound file of an older
    format (rebuilt quietly). ``on_cached(result)`` runs after a successful load, outside that check (what it
    raises, e.g. a DataError, propagates). ``path`` None: no cache, only ``build()``.
    """
    if path is not None and path.is_file():
        try:
            cached = load(path)
        except UNREADABLE as problem:
            log.warning("data cache file %s is corrupt (%s: %s): rebuilding it", path, type(problem).__name__,
                        str(problem)[:200])
        else:
            if cached is not None:
                if on_cached is not None:
                    on_cached(cached)
                return cached
    result = build()
    if path is not None:
        save(result, path)
    return result


def write_bytes_atomic(data: bytes, path: Path) -> None:
    """Write bytes through a temporary file in the same folder, so readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)


def write_json_atomic(path: Path, data) -> None:
    """Write JSON through a temporary file in the same folder, so readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    os.replace(f.name, path)


def replay_skips(
    bad_samples: BadSamples | None,
    split: str,
    skipped: list[tuple[str, str, str]],
    total: int,
    what: str,
    stage: str = "files",
) -> None:
    """Tell ``bad_samples`` again what a cached read of ``total`` records skipped (in ``stage``: unreadable
    files, over a length limit, ...), so every run counts it."""
    policy = bad_samples if bad_samples is not None else BadSamples()
    policy.begin(split, stage)
    for key, reason, problem in skipped:
        policy.skip(split, stage, key, reason, problem)
    policy.end(split, stage, total, f"{what}s")


def file_skip(path: str | None, key: str, problem: Exception, corrupt: str) -> tuple[str, str, str]:
    """(file or key, reason, problem) of a record whose file could not be read: "missing file" when the file does
    not exist, else ``corrupt`` ("corrupt image", "corrupt audio")."""
    reason = "missing file" if path and not os.path.exists(path) else corrupt
    return str(path or key), reason, str(problem)


def report_store_skips(
    bad_samples: BadSamples | None,
    split: str,
    skipped: list[tuple[str, str, str]],
    total: int,
    rows: int,
    what: str,
    error: type[Exception],
) -> None:
    """Tell ``bad_samples`` what preparing a store of ``total`` records skipped (every run, cached or not). A split
    with records none of which could be read is refused by ``error`` whatever ``max_skip_fraction`` says, after
    its files are named (or at the first, with on_error=raise)."""
    if total and not rows:
        policy = bad_samples if bad_samples is not None else BadSamples()
        naming = BadSamples(policy.on_error, 1.0, quiet=policy.quiet)  # its end() must not stop with a DataError
        replay_skips(naming, split, skipped, total, what)
        raise error(f"none of the {total} {what}s of the {split} split could be read (see the warnings)")
    replay_skips(bad_samples, split, skipped, total, what)
