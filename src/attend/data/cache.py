"""Prepared data: read record by record with unreadable ones skipped; on disk under keyed names, written atomically."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

log = logging.getLogger("attend.data")


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


def read_each(records: list, read: Callable, error: type[Exception], what: str) -> tuple[list, list[int]]:
    """``read(record)`` of every record, and the indices of those read; a record whose ``read`` raises
    ``error`` is skipped, named (by its ``key``) in a warning and counted. None readable: ``error``."""
    results, kept = [], []
    for index, record in enumerate(records):
        try:
            results.append(read(record))
            kept.append(index)
        except error as problem:
            log.warning("skipping %s %s: %s", what, record.key, problem)
    skipped = len(records) - len(kept)
    if skipped:
        log.warning("skipped %d of %d %ss that could not be read", skipped, len(records), what)
    if not results:
        raise error(f"none of the {len(records)} {what}s of a split could be read (see the warnings)")
    return results, kept
