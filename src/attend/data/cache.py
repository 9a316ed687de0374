"""The one cache file outside the example store, the manifest of the audio espeak-ng synthesises: written
atomically, and rebuilt with a warning when found truncated or corrupt."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger("attend.data")
T = TypeVar("T")

# what reading a truncated or overwritten JSON cache file raises: JSON and UTF-8 decoding (ValueError), a missing
# entry (KeyError, IndexError, TypeError), and OSError for a file that cannot be read at all
UNREADABLE = (OSError, ValueError, KeyError, IndexError, TypeError)


def load_or_rebuild(path: Path | None, load: Callable[[Path], T | None], build: Callable[[], T],
                    save: Callable[[T, Path], None]) -> T:
    """``load(path)`` of a cache file, or ``build()`` then ``save(result, path)`` when there is none (``path`` None:
    only ``build()``). A file ``load`` cannot read (one of ``UNREADABLE``) is named in a warning and rebuilt, one it
    gives None for (an older format) quietly."""
    if path is not None and path.is_file():
        try:
            cached = load(path)
        except UNREADABLE as problem:
            log.warning("data cache file %s is corrupt (%s: %s): rebuilding it", path, type(problem).__name__,
                        str(problem)[:200])
        else:
            if cached is not None:
                return cached
    result = build()
    if path is not None:
        save(result, path)
    return result


def write_json_atomic(path: Path, data) -> None:
    """Write JSON through a temporary file in the same folder, so readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    os.replace(f.name, path)
