"""Prepared data: read record by record with unreadable ones skipped or stopped at; cached under keyed names,
written atomically, and rebuilt with a warning when a cache file is found truncated or corrupt."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

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


def cache_file(cache_dir: str | os.PathLike, folder: str, source, *settings, label: str = "") -> Path:
    """``cache_dir/folder/<Source>[-<label>]-<hash>.pt``, the hash over the source's ``settings()`` and ``settings``."""
    key_text = json.dumps([type(source).__name__, getattr(source, "settings", dict)(), *settings], default=str)
    key = hashlib.sha1(key_text.encode("utf-8")).hexdigest()[:16]
    name = type(source).__name__ + (f"-{label}" if label else "")
    return Path(cache_dir) / folder / f"{name}-{key}.pt"


def save_atomic(data, path: Path) -> None:
    """torch.save to ``path`` through a temporary file: a crash never leaves half a cache file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save(data, partial)
    partial.replace(path)


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


def read_each(
    records: list,
    read: Callable,
    error: type[Exception],
    what: str,
    bad_samples: BadSamples | None = None,
    split: str = "data",
    corrupt: str = "corrupt file",
) -> tuple[list, list[int], list[tuple[str, str, str]]]:
    """``read(record)`` of every record, the indices of those read, and (key, reason, problem) of those
    skipped. A record whose ``read`` raises ``error`` goes to ``bad_samples`` (skipped, named in a warning
    and counted, or DataError with on_error=raise) as a "missing file" or ``corrupt``. None readable: ``error``."""
    policy = bad_samples if bad_samples is not None else BadSamples()
    policy.begin(split, "files")
    results, kept, skipped = [], [], []
    for index, record in enumerate(records):
        try:
            results.append(read(record))
            kept.append(index)
        except error as problem:
            path = getattr(record, "path", None)
            reason = "missing file" if path and not os.path.exists(path) else corrupt
            skipped.append((str(path or record.key), reason, str(problem)))
            policy.skip(split, "files", *skipped[-1])
    if records and not results:
        raise error(f"none of the {len(records)} {what}s of the {split} split could be read (see the warnings)")
    policy.end(split, "files", len(records), f"{what}s")
    return results, kept, skipped


def replay_skips(
    bad_samples: BadSamples | None, split: str, skipped: list[tuple[str, str, str]], total: int, what: str
) -> None:
    """Tell ``bad_samples`` again what a cached read of ``total`` records skipped, so every run counts it."""
    policy = bad_samples if bad_samples is not None else BadSamples()
    policy.begin(split, "files")
    for key, reason, problem in skipped:
        policy.skip(split, "files", key, reason, problem)
    policy.end(split, "files", total, f"{what}s")


def cached_skips(cached: dict, records: list) -> list[tuple[str, str, str]]:
    """The skips a cache file recorded; files written before they were recorded give the records not kept."""
    if "skipped" in cached:
        return [tuple(skip) for skip in cached["skipped"]]
    kept = set(cached["kept"])
    return [
        (str(getattr(r, "path", None) or r.key), "unreadable", "could not be read when the cache was built")
        for i, r in enumerate(records)
        if i not in kept
    ]
