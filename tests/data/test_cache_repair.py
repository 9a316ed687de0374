"""A truncated or overwritten data-cache file is named in a warning and rebuilt, never a traceback: every kind
Attend writes (example-store shards and manifests of all three modalities, and the espeak-ng manifest, the one
cache beside the store)."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest
import torch

from attend.data.cache import load_or_rebuild
from tests.helpers.audio import HAS_ESPEAK, tiny_espeak
from tests.helpers.contract_data import started, store_files


def truncate(path: Path) -> None:
    """Cut ``path`` in half, as an interrupted copy or a full disk leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def overwrite_with_garbage(path: Path) -> None:
    """Replace ``path`` by random bytes of the same length."""
    path.write_bytes(random.Random(0).randbytes(path.stat().st_size))


def warned_about(caplog: pytest.LogCaptureFixture, path: Path) -> bool:
    """Whether a warning said that ``path`` is corrupt and is being rebuilt."""
    return any(
        record.levelno == logging.WARNING and str(path) in record.getMessage() and "rebuilding" in record.getMessage()
        for record in caplog.records
    )


MODALITIES = ("text", "images", "audio")


def every_example(dm) -> list:
    """Every example of every split, as the loaders see them (image and feature tensors included)."""
    return [[dm.datasets[split][i] for i in range(len(dm.datasets[split]))] for split in ("train", "val", "test")]


def same_examples(a: list, b: list) -> bool:
    def same(x, y) -> bool:
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and torch.equal(x, y)
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, list | tuple):
            return len(x) == len(y) and all(same(i, j) for i, j in zip(x, y, strict=True))
        return x == y

    return same(a, b)


@pytest.mark.parametrize("modality", MODALITIES)
@pytest.mark.parametrize("damage", [truncate, overwrite_with_garbage])
@pytest.mark.parametrize("kind", ["shard", "manifest.json"])
def test_a_damaged_store_file_is_named_and_rebuilt(modality, damage, kind, tmp_path: Path, caplog) -> None:
    cache_dir = tmp_path / "cache"
    first = every_example(started(modality, cache_dir))
    files = store_files(cache_dir, kind)
    assert files, f"no {kind} in the {modality} stores"
    built = {path: path.read_bytes() for path in files}
    for path in files:
        damage(path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = every_example(started(modality, cache_dir))
    assert same_examples(again, first)
    for path in files:
        assert warned_about(caplog, path.parent)  # the store named, with "rebuilding"
        assert path.read_bytes() == built[path]  # whole again, byte for byte


def test_a_missing_shard_is_rebuilt_and_the_others_are_kept(tmp_path: Path, caplog) -> None:
    cache_dir = tmp_path / "cache"
    first = every_example(started("text", cache_dir))
    shards = store_files(cache_dir, "shard")
    assert len(shards) > 3  # the training split has several
    kept = {path: path.stat().st_mtime_ns for path in shards[1:]}
    shards[0].unlink()
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        assert same_examples(every_example(started("text", cache_dir)), first)
    assert warned_about(caplog, shards[0].parent) and shards[0].is_file()
    assert all(path.stat().st_mtime_ns == mtime for path, mtime in kept.items())  # not prepared again


# espeak-ng manifest ----------------------------------------------------------------------------
def drop_a_split(path: Path) -> None:
    """A manifest that is valid JSON but misses an entry."""
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest["splits"]["val"]
    path.write_text(json.dumps(manifest), encoding="utf-8")


@pytest.mark.skipif(not HAS_ESPEAK, reason="espeak-ng is not installed")
@pytest.mark.parametrize("damage", [truncate, drop_a_split])
def test_espeak_manifest_is_rebuilt(damage, tmp_path: Path, caplog) -> None:
    first = tiny_espeak(tmp_path).splits()
    path = tiny_espeak(tmp_path).folder() / "manifest.json"
    damage(path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = tiny_espeak(tmp_path).splits()
    assert warned_about(caplog, path)
    assert again == first
    assert set(json.loads(path.read_text(encoding="utf-8"))["splits"]) == {"train", "val", "test"}


# the helper -----------------------------------------------------------------------------------
def test_load_or_rebuild_rebuilds_an_old_format_quietly(tmp_path, caplog) -> None:
    path = tmp_path / "x.json"
    path.write_text("{}", encoding="utf-8")
    save = lambda data, p: p.write_text(json.dumps(data), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        assert load_or_rebuild(path, lambda p: None, lambda: {"v": 1}, save) == {"v": 1}  # None: out of date
    assert not caplog.records and json.loads(path.read_text()) == {"v": 1}
    read = lambda p: json.loads(p.read_text())
    assert load_or_rebuild(path, read, lambda: pytest.fail("no rebuild"), save) == {"v": 1}
    assert load_or_rebuild(None, read, lambda: 5, save) == 5  # no cache folder
