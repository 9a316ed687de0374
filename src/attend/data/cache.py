"""Prepared data: read record by record with unreadable ones skipped or stopped at; cached under keyed names."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from attend.data.bad_samples import BadSamples


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
