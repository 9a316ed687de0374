"""The example store (attend.data.store): shards prepared once, in parallel, resumably, by one process while
others wait; rows read back from the mapped files exactly; damage found by the manifest and rebuilt."""

from __future__ import annotations

import logging
import multiprocessing
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from attend.data.store import DamagedStoreError, Shard, open_store, prepared_store, ragged, store_folder


def prepare(chunk: list[int], first: int) -> Shard:
    """Items are ints; multiples of 7 are skipped, the others become a row of every column kind."""
    kept = [i for i in chunk if i % 7]
    return Shard(
        {
            "index": pa.array(kept, type=pa.int64()),
            "ids": ragged([list(range(i % 5)) for i in kept]),
            "text": pa.array([f"item {i} ü" for i in kept], type=pa.string()),
            "blob": pa.array([bytes([i % 256]) * 3 for i in kept], type=pa.binary()),
            "maybe": pa.array([None if i % 2 else i for i in kept], type=pa.int64()),
        },
        skipped=[(f"item {i}", "multiple of seven", f"{i} is a multiple of 7") for i in chunk if not i % 7],
    )


def rows(store) -> list:
    names = ("index", "ids", "text", "maybe")
    return [store.row(r, names) + [bytes(store.buffer("blob", r))] for r in range(len(store))]


def expected_rows(items) -> list:
    return [[i, list(range(i % 5)), f"item {i} ü", None if i % 2 else i, bytes([i % 256]) * 3] for i in items if i % 7]


def test_rows_come_back_exactly_in_order_with_skips_and_meta(tmp_path: Path) -> None:
    store = prepared_store(tmp_path / "s", range(100), prepare, shard_size=16, meta=lambda: {"fitted": "yes"})
    assert rows(store) == expected_rows(range(100))
    assert store.items == 100 and len(store.skipped) == 15 and store.skipped[0][0] == "item 0"
    assert store.meta == {"fitted": "yes"}
    assert store.list_lengths("ids").tolist() == [i % 5 for i in range(100) if i % 7]
    assert store.column("index").tolist() == [i for i in range(100) if i % 7]
    assert len(list((tmp_path / "s").glob("shard-*.arrow"))) == 7


def test_a_finished_store_is_opened_without_reading_the_items(tmp_path: Path) -> None:
    prepared_store(tmp_path / "s", range(50), prepare, shard_size=16)

    def no_items():
        raise AssertionError("a finished store must not read its items")
        yield

    def no_prepare(chunk, first):
        raise AssertionError("a finished store must not prepare")

    assert rows(prepared_store(tmp_path / "s", no_items(), no_prepare, shard_size=16)) == expected_rows(range(50))


def test_worker_processes_write_the_same_store(tmp_path: Path) -> None:
    alone = prepared_store(tmp_path / "a", range(200), prepare, shard_size=16, workers=0)
    forked = prepared_store(tmp_path / "b", range(200), prepare, shard_size=16, workers=2)
    assert rows(forked) == rows(alone) and forked.skipped == alone.skipped
    for path in sorted((tmp_path / "a").glob("shard-*.arrow")):
        assert (tmp_path / "b" / path.name).read_bytes() == path.read_bytes()


def test_an_interrupted_preparation_resumes_from_the_shards_written(tmp_path: Path) -> None:
    prepared: list[int] = []

    def failing(chunk, first):
        if first >= 48:
            raise KeyboardInterrupt  # the run is stopped while preparing the fourth shard
        prepared.append(first)
        return prepare(chunk, first)

    with pytest.raises(KeyboardInterrupt):
        prepared_store(tmp_path / "s", range(100), failing, shard_size=16)
    assert not (tmp_path / "s" / "manifest.json").exists() and prepared == [0, 16, 32]
    again: list[int] = []

    def counting(chunk, first):
        again.append(first)
        return prepare(chunk, first)

    store = prepared_store(tmp_path / "s", range(100), counting, shard_size=16)
    assert again == [48, 64, 80, 96] and rows(store) == expected_rows(range(100))
    assert store.items == 100 and len(store.skipped) == 15  # the reused shards' skips are kept


@pytest.mark.parametrize("damage", ["truncate", "remove", "manifest"])
def test_damage_is_named_and_only_the_damaged_shards_are_prepared_again(damage, tmp_path: Path, caplog) -> None:
    folder = tmp_path / "s"
    prepared_store(folder, range(100), prepare, shard_size=16)
    shard = folder / "shard-00002.arrow"
    if damage == "truncate":
        shard.write_bytes(shard.read_bytes()[:100])
    elif damage == "remove":
        shard.unlink()
    else:
        (folder / "manifest.json").write_text('{"shards": [', encoding="utf-8")
    with pytest.raises(DamagedStoreError):
        open_store(folder)
    again: list[int] = []

    def counting(chunk, first):
        again.append(first)
        return prepare(chunk, first)

    with caplog.at_level(logging.WARNING, logger="attend.data"):
        store = prepared_store(folder, range(100), counting, shard_size=16)
    assert f"data store {folder} is damaged" in caplog.text and "rebuilding" in caplog.text
    assert again == ([] if damage == "manifest" else [32])
    assert rows(store) == expected_rows(range(100))


def _prepare_in_another_process(folder: str, log_path: str) -> None:
    def logged(chunk, first):
        with open(log_path, "a") as f:
            f.write(f"{first}\n")
        return prepare(chunk, first)

    prepared_store(Path(folder), range(64), logged, shard_size=16)


def test_processes_that_start_together_prepare_once(tmp_path: Path) -> None:
    """DDP ranks and parallel sweep jobs all call prepare_data: one prepares, the others wait and open."""
    log_path = tmp_path / "prepared.log"
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_prepare_in_another_process, args=(str(tmp_path / "s"), str(log_path)))
                 for _ in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert all(process.exitcode == 0 for process in processes)
    assert sorted(int(line) for line in log_path.read_text().split()) == [0, 16, 32, 48]
    assert rows(open_store(tmp_path / "s")) == expected_rows(range(64))


def test_a_store_pickles_as_its_folder(tmp_path: Path) -> None:
    """Loader workers get the folder and map the files again: the rows never travel through pickles."""
    store = prepared_store(tmp_path / "s", range(2000), prepare, shard_size=500)
    payload = pickle.dumps(store)
    assert len(payload) < 5000 and rows(pickle.loads(payload)) == rows(store)


def test_values_are_views_of_the_mapped_file(tmp_path: Path) -> None:
    store = prepared_store(tmp_path / "s", range(20), prepare, shard_size=16)
    view = store.buffer("blob", 0)
    assert isinstance(view, np.ndarray) and not view.flags.writeable  # no copy was made


def test_store_folders_are_keyed_by_what_the_examples_depend_on(tmp_path: Path) -> None:
    assert store_folder(tmp_path, "text", {"a": 1}) == store_folder(tmp_path, "text", {"a": 1})
    assert store_folder(tmp_path, "text", {"a": 1}) != store_folder(tmp_path, "text", {"a": 2})
    assert store_folder(tmp_path, "text", 1).parent == tmp_path / "store"
    assert store_folder(None, "text", 1).is_relative_to(store_folder(None, "images", 1).parent)  # one temporary


def test_a_read_only_cache_opens_its_finished_stores(tmp_path: Path, monkeypatch) -> None:
    """A shared cache mounted read-only (simulated: creating the lock file fails, as root cannot be refused by
    permissions): a finished store opens without the lock; one that must be prepared is a one-line DataError."""
    import builtins

    from attend.data.bad_samples import DataError

    prepared_store(tmp_path / "s", range(50), prepare, shard_size=16)
    real_open = builtins.open

    def read_only(path, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wax+"):
            raise OSError(30, "Read-only file system", str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", read_only)
    assert rows(prepared_store(tmp_path / "s", range(50), prepare, shard_size=16)) == expected_rows(range(50))
    with pytest.raises(DataError, match=r"not prepared and cannot be written \(Read-only file system\).*cache_dir"):
        prepared_store(tmp_path / "other", range(50), prepare, shard_size=16)


def test_temporary_files_of_a_killed_preparation_are_removed(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    leftovers = [folder / ".shard-00003.12345.tmp", folder / ".manifest.12345.tmp"]
    for path in leftovers:
        path.write_bytes(b"x" * 1000)  # what a killed worker leaves
    store = prepared_store(folder, range(50), prepare, shard_size=16)
    assert rows(store) == expected_rows(range(50)) and not any(path.exists() for path in leftovers)


FORK_AFTER_THREADS = """
import sys
from pathlib import Path
import pyarrow as pa
import torch
from attend.data.store import Shard, prepared_store

torch.set_num_threads(2)
torch.ones(4_000_000).mul(2).sum()  # the parent's OpenMP threads start, as a model built before the features does


def prepare(rows, first):
    total = float((torch.ones(4_000_000) * 2).sum())  # one parallel-sized operation in the forked worker
    return Shard({"v": pa.array([total] * len(rows)), "threads": pa.array([torch.get_num_threads()] * len(rows))})


store = prepared_store(Path(sys.argv[1]), range(8), prepare, shard_size=2, workers=2)
print(len(store), sorted(set(store.column("threads").tolist())))
"""


def test_forked_workers_run_one_torch_thread_after_the_parent_used_two(tmp_path):
    """A worker forked once the parent has run a parallel operation would wait forever at its own first one
    (libgomp's pool does not survive a fork): the workers run one thread each. In a subprocess, with a timeout, so
    a regression fails instead of hanging the suite."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", FORK_AFTER_THREADS, str(tmp_path / "store")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[0] == "8 [1]"
