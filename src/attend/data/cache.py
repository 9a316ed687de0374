"""Prepared data on disk: file names keyed by everything that shaped the data, written atomically."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch


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
