"""The example store: prepared examples in Arrow IPC files that every loader worker and DDP rank memory-maps.

Why Arrow and not our own format, ``datasets`` or WebDataset: a memory-mapped Arrow file is read in place, so the page
cache holds one copy every worker and rank shares, and rows can be read at random (length-bucketed batches need it;
tar shards do not give it), with no fingerprinting, cache folders or dozen dependencies beside it. A store is a
folder ``<cache_dir>/store/<kind>-<key>/`` of shards (each written to a temporary name, then renamed: one that exists
is whole) and a ``manifest.json`` written last; see docs/design.md ("Data") for locking, resuming and repair.
"""

from __future__ import annotations

import atexit
import bisect
import ctypes
import fcntl
import gc
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from attend.data.bad_samples import DataError

log = logging.getLogger("attend.data")
FORMAT = 2  # bump when what a store holds changes: older stores get a new key and are prepared again (2: tokenizer
# states in the manifest as JSON, no longer a pickle)
Skip = tuple[str, str, str]  # (key of the item, reason, problem): what a bad sample is reported with


class DamagedStoreError(ValueError):
    """A store whose files disagree with its manifest (truncated, overwritten, missing)."""


@dataclass
class Shard:
    """What preparing one shard gives: its columns (equal lengths) and the items it skipped."""

    columns: dict[str, pa.Array | list]
    skipped: list[Skip] = field(default_factory=list)


def store_folder(cache_dir: str | os.PathLike | None, kind: str, *key_parts: Any) -> Path:
    """``<cache_dir>/store/<kind>-<hash of key_parts>``; without a cache folder, a temporary one for this process."""
    key_text = json.dumps([FORMAT, kind, *key_parts], default=str, sort_keys=True)
    key = hashlib.sha1(key_text.encode("utf-8")).hexdigest()[:16]
    root = Path(cache_dir) if cache_dir is not None else _process_temp_dir()
    return root / "store" / f"{kind}-{key}"


def file_stamp(path: str | os.PathLike | None) -> list[int] | None:
    """[size, modification time in ns] of a file, for store keys (a changed file gives a new key); None: no file."""
    if path is None:
        return None
    try:
        stat = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in the name (which no file has)
        return None
    return [stat.st_size, stat.st_mtime_ns]


def source_settings(source) -> Any:
    """What a source's records depend on, for store keys: its ``settings()`` with the size and modification time
    of every setting that names a file; a source without settings is hashed whole (read at every start)."""
    if not hasattr(source, "settings"):
        return hashlib.sha1(pickle.dumps(source.splits())).hexdigest()
    settings = source.settings()
    files = {key: file_stamp(value) for key, value in sorted(settings.items())
             if isinstance(value, (str, os.PathLike)) and str(value) and os.path.isfile(value)}
    return {**settings, "file stamps": files} if files else settings


_TEMP_DIR: Path | None = None


def _process_temp_dir() -> Path:
    """One temporary folder per process for stores without a cache folder, removed at exit."""
    global _TEMP_DIR
    if _TEMP_DIR is None:
        _TEMP_DIR = Path(tempfile.mkdtemp(prefix="attend-store-"))
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(_TEMP_DIR, ignore_errors=True))
    return _TEMP_DIR


class ExampleStore:
    """The rows of a finished store, memory-mapped, in the order of the input items (skipped ones left out)."""

    def __init__(self, folder: Path, manifest: dict[str, Any], tables: list[pa.Table]) -> None:
        self.folder = folder
        self.manifest = manifest
        self.meta: dict[str, Any] = manifest.get("meta", {})
        self.skipped: list[Skip] = [tuple(skip) for skip in manifest.get("skipped", [])]
        self.items: int = manifest.get("items", 0)  # input items, skipped ones included
        self._tables = tables
        self._starts = [0, *itertools.accumulate(table.num_rows for table in tables)]  # each shard's first row
        self._lists: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._arrays: dict[str, list[pa.Array]] = {}
        self._readers: dict[tuple[str, int], Callable[[int], Any]] = {}

    def __len__(self) -> int:
        return self._starts[-1]

    @property
    def column_names(self) -> list[str]:
        return self._tables[0].column_names if self._tables else list(self.manifest.get("columns", []))

    def column(self, name: str) -> np.ndarray:
        """A numeric column of every row as one numpy array (copied out of the shards: fine for lengths, ids)."""
        if not self._tables:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([table.column(name).to_numpy() for table in self._tables])

    def list_lengths(self, name: str) -> np.ndarray:
        """The length of a list column's entry in every row (int64), read from its offsets."""
        return np.concatenate([np.diff(offsets) for offsets, _ in self._list_parts(name)] or [np.zeros(0, np.int64)])

    def list_values(self, name: str) -> np.ndarray:
        """Every entry of a list column, all rows' lists joined in row order (one numpy array)."""
        parts = [values[offsets[0] : offsets[-1]] for offsets, values in self._list_parts(name)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _locate(self, row: int) -> tuple[int, int]:
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} of a store of {len(self)} rows")
        shard = bisect.bisect_right(self._starts, row) - 1
        return shard, row - self._starts[shard]

    def value(self, name: str, row: int) -> Any:
        """One row's value as Python (str, int, float, list of ints, ...); binary columns give bytes."""
        shard, local = self._locate(row)
        return self._reader(name, shard)(local)

    def row(self, row: int, names: Sequence[str]) -> list[Any]:
        """Several values of one row (``value`` of each name), the row located once."""
        shard, local = self._locate(row)
        return [self._reader(name, shard)(local) for name in names]

    def _reader(self, name: str, shard: int) -> Callable[[int], Any]:
        key = (name, shard)
        if key not in self._readers:
            self._readers[key] = _reader(self._array(name, shard))
        return self._readers[key]

    def ids(self, name: str, row: int) -> list[int]:
        """One row's entry of a list-of-int column, read straight from the mapped buffers."""
        shard, local = self._locate(row)
        offsets, values = self._list_parts(name)[shard]
        return values[offsets[local] : offsets[local + 1]].tolist()

    def buffer(self, name: str, row: int) -> np.ndarray | None:
        """One row's binary value as a read-only uint8 view of the mapped file (None for a null)."""
        shard, local = self._locate(row)
        scalar = self._array(name, shard)[local]
        if not scalar.is_valid:
            return None
        view = np.frombuffer(scalar.as_buffer(), dtype=np.uint8)
        view.flags.writeable = False  # the mapping is read-only: a write would crash the process, not raise
        return view

    def _array(self, name: str, shard: int) -> pa.Array:
        """A column of one shard as one Arrow array (looked up once: a lookup by name costs more than the read)."""
        if name not in self._arrays:  # chunk(0), not combine_chunks(): that copies even a single chunk
            self._arrays[name] = [_only_chunk(table.column(name)) for table in self._tables]
        return self._arrays[name][shard]

    def _list_parts(self, name: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """(offsets, values) numpy views of a list column, per shard (each shard is one Arrow chunk)."""
        if name not in self._lists:
            arrays = [self._array(name, shard) for shard in range(len(self._tables))]
            self._lists[name] = [(a.offsets.to_numpy(), a.values.to_numpy(zero_copy_only=True)) for a in arrays]
        return self._lists[name]

    # loader workers unpickle a store by reopening its mapped files, not by copying them
    def __getstate__(self) -> dict[str, Any]:
        return {"folder": str(self.folder)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        store = open_store(Path(state["folder"]))
        if store is None:
            raise DamagedStoreError(f"the example store {state['folder']} is gone")
        self.__dict__.update(store.__dict__)


def _only_chunk(column: pa.ChunkedArray) -> pa.Array:
    """The one chunk of a shard's column (shards are written as one record batch), as a view of the mapping."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _reader(array: pa.Array) -> Callable[[int], Any]:
    """A function of a row that gives ``array``'s value there as Python: strings, numbers and lists of ints read from
    numpy views of the mapped buffers, in a tenth of the time of Arrow scalars."""
    kind = array.type
    if array.null_count == 0 and array.offset == 0:
        if pa.types.is_string(kind):
            offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[: len(array) + 1]
            data = array.buffers()[2]
            text = memoryview(data if data is not None else b"")

            def string(i: int) -> str:
                start, end = offsets[i : i + 2].tolist()
                return str(text[start:end], "utf-8")

            return string
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            values = array.to_numpy(zero_copy_only=True)
            return lambda i: values[i].item()
        if pa.types.is_list(kind) and pa.types.is_integer(kind.value_type) and array.values.null_count == 0:
            offsets = array.offsets.to_numpy()
            items = array.values.to_numpy(zero_copy_only=True)
            return lambda i: items[offsets[i] : offsets[i + 1]].tolist()
    return lambda i: array[i].as_py()


def _map_shard(path: Path) -> pa.Table:
    """A shard file as a table whose buffers point into the memory-mapped file."""
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()  # the buffers keep the mapping open


def open_store(folder: Path) -> ExampleStore | None:
    """The finished store in ``folder``; None if there is none; DamagedStoreError if it disagrees with its manifest."""
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        shards = manifest["shards"]
    except (ValueError, KeyError, TypeError) as problem:
        raise DamagedStoreError(f"its manifest cannot be read ({problem})") from problem
    tables = []
    for shard in shards:
        path = folder / shard["file"]
        if not path.is_file():
            raise DamagedStoreError(f"{shard['file']} is missing")
        if (size := path.stat().st_size) != shard["bytes"]:
            raise DamagedStoreError(f"{shard['file']} has {size} bytes, the manifest says {shard['bytes']}")
        try:
            table = _map_shard(path)
        except (pa.ArrowInvalid, OSError) as problem:
            raise DamagedStoreError(f"{shard['file']} cannot be read ({problem})") from problem
        if table.num_rows != shard["rows"]:
            raise DamagedStoreError(f"{shard['file']} has {table.num_rows} rows, the manifest says {shard['rows']}")
        tables.append(table)
    return ExampleStore(folder, manifest, tables)


def prepared_store(folder: Path, items: Iterable[Any], prepare: Callable[[list[Any], int], Shard],
                   shard_size: int = 2048, workers: int = 0,
                   meta: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
                   describe: str = "examples") -> ExampleStore:
    """The store in ``folder``, prepared first when it is missing, unfinished or damaged (named in a warning).

    ``prepare(chunk, first_index)`` turns up to ``shard_size`` consecutive items into a ``Shard``, in ``workers``
    forked processes (0 or 1: this one), a bounded number of chunks at a time: ``items`` is read lazily, and only
    when something must be prepared. ``meta`` (JSON, or a function giving it once all is prepared) is kept.
    """
    with suppress(DamagedStoreError):  # a finished store opens without the lock: a shared read-only cache works
        if (store := open_store(folder)) is not None:
            return store
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / ".lock", "a")  # held by _exclusive below
    except OSError as problem:
        raise DataError(f"the data store {folder} is not prepared and cannot be written ({problem.strerror}): set "
                        "paths.cache_dir to a folder you can write (a read-only cache works once it is prepared)"
                        ) from problem
    with lock, _exclusive(lock):  # other processes wait here, then find the store finished
        try:
            store = open_store(folder)
        except DamagedStoreError as problem:
            log.warning("data store %s is damaged (%s): rebuilding it", folder, problem)
            _remove_disagreeing(folder)
            store = None
        if store is not None:
            return store
        _remove_leftovers(folder)
        return _build(folder, items, prepare, shard_size, workers, meta, describe)


@contextmanager
def _exclusive(lock) -> Iterator[None]:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)


def _remove_leftovers(folder: Path) -> None:
    """Temporary shard and manifest files of a preparation that was killed (up to ~65 MB each): whoever holds the
    lock prepares alone, so any such file is another, dead process's."""
    for path in folder.glob(".*.tmp"):
        path.unlink(missing_ok=True)


def _remove_disagreeing(folder: Path) -> None:
    """Drop the manifest and every shard that cannot be read whole or disagrees with its manifest entry (rows,
    bytes, range of items: another store's shard is not kept); without a readable manifest, each shard's own record
    of its range vouches for it (checked against the input when it is reused)."""
    manifest_path = folder / "manifest.json"
    try:
        entries = {entry["file"]: entry for entry in json.loads(manifest_path.read_text(encoding="utf-8"))["shards"]}
    except (OSError, ValueError, KeyError, TypeError):
        entries = None
    manifest_path.unlink(missing_ok=True)
    for path in folder.glob("shard-*.arrow"):
        written = _reuse_shard(path)
        if written is None or (entries is not None and not _agrees(written.entry, entries.get(path.name))):
            path.unlink(missing_ok=True)


def _agrees(found: dict[str, Any], recorded: dict[str, Any] | None) -> bool:
    """Whether a shard on disk is the one a manifest entry describes (rows, bytes, and range where recorded)."""
    keys = ("rows", "bytes", "first", "items")
    return recorded is not None and all(found.get(key) == recorded[key] for key in keys if key in recorded)


_JOB: tuple[Callable[[list[Any], int], Shard], Path] | None = None  # what forked workers run (set before forking)


def _chunks(items: Iterable[Any], size: int) -> Iterator[tuple[int, int, list[Any]]]:
    """(shard number, index of its first item, items) of consecutive chunks."""
    chunk: list[Any] = []
    number = first = 0
    for index, item in enumerate(items):
        if not chunk:
            first = index
        chunk.append(item)
        if len(chunk) == size:
            yield number, first, chunk
            number, chunk = number + 1, []
    if chunk:
        yield number, first, chunk


def _shard_name(number: int) -> str:
    return f"shard-{number:05d}.arrow"


class Written(NamedTuple):
    """A shard on disk: its manifest entry and the items it skipped."""

    entry: dict[str, Any]
    skipped: list[Skip]


def _write_shard(folder: Path, number: int, shard: Shard, first: int, items: int) -> Written:
    """Write one shard (temporary name, then rename), its skips and range of items in the schema metadata."""
    table = pa.table(shard.columns)
    skipped = json.dumps({"skipped": [list(s) for s in shard.skipped], "first": first, "items": items})
    table = table.replace_schema_metadata({b"attend": skipped.encode("utf-8")})
    path = folder / _shard_name(number)
    partial = folder / f".{_shard_name(number)}.{os.getpid()}.tmp"
    with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=max(table.num_rows, 1))  # one record batch: one chunk per column
    partial.replace(path)
    return Written(_entry(path, table.num_rows, first, items), list(shard.skipped))


def _entry(path: Path, rows: int, first: int | None, items: int) -> dict[str, Any]:
    """A shard's manifest entry: its file, rows and bytes, and the range of input items it was prepared from."""
    return {"file": path.name, "rows": rows, "bytes": path.stat().st_size, "first": first, "items": items}


def _one_torch_thread() -> None:
    """A forked worker runs one torch thread for its life, as DataLoader workers do: each worker takes a core, and
    the parent's OpenMP thread pool does not survive the fork (libgomp waits forever at the worker's first parallel
    operation once the parent has run one: a first start that hung preparing Whisper's features)."""
    torch = sys.modules.get("torch")  # the store itself needs no torch
    if torch is not None:
        torch.set_num_threads(1)


def _prepare_in_worker(job: tuple[int, int, list[Any]]) -> Written:
    number, first, chunk = job
    prepare, folder = _JOB  # type: ignore[misc]
    return _write_shard(folder, number, prepare(chunk, first), first, len(chunk))


def _reuse_shard(path: Path, first: int | None = None, items: int | None = None) -> Written | None:
    """A whole shard left by an interrupted preparation (or a repair); None if it is not there, cannot be read
    whole, or was prepared from other items than ``first`` and ``items`` say (when given)."""
    if not path.is_file():
        return None
    try:
        table = _map_shard(path)
        recorded = json.loads(table.schema.metadata[b"attend"])
        start, count = recorded.get("first"), recorded["items"]
        skipped = [tuple(s) for s in recorded["skipped"]]
    except (pa.ArrowInvalid, OSError, KeyError, TypeError, ValueError, AttributeError):
        return None
    if first is not None and (start != first or count != items or table.num_rows > count):
        return None
    return Written(_entry(path, table.num_rows, start, count), skipped)


def _build(folder: Path, items: Iterable[Any], prepare: Callable[[list[Any], int], Shard], shard_size: int,
           workers: int, meta: dict[str, Any] | Callable[[], dict[str, Any]] | None, describe: str) -> ExampleStore:
    global _JOB
    written: dict[int, Written] = {}
    reused = 0
    jobs = _chunks(items, shard_size)
    # no more processes than chunks: a single chunk is prepared here, with nothing to fork
    ahead = list(itertools.islice(jobs, max(workers, 2)))
    parallel = workers > 1 and len(ahead) > 1
    if parallel:
        _JOB = (prepare, folder)
        gc.collect()  # give what the caller freed (a tokenizer's training texts) back, or every forked worker counts it
        with suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        pool = ProcessPoolExecutor(min(workers, len(ahead)), mp_context=multiprocessing.get_context("fork"),
                                   initializer=_one_torch_thread)
    try:
        pending: dict[Future, int] = {}
        for number, first, chunk in itertools.chain(ahead, jobs):
            if found := _reuse_shard(folder / _shard_name(number), first, len(chunk)):
                written[number] = found
                reused += 1
            elif not parallel:
                written[number] = _write_shard(folder, number, prepare(chunk, first), first, len(chunk))
            else:
                pending[pool.submit(_prepare_in_worker, (number, first, chunk))] = number
                if len(pending) >= 2 * workers:  # a bounded number of chunks in flight
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        written[pending.pop(future)] = future.result()
        for future in pending:
            written[pending[future]] = future.result()
    finally:
        if parallel:
            pool.shutdown(cancel_futures=True)
            _JOB = None
    for stale in sorted(folder.glob("shard-*.arrow")):  # shards past the end, from a larger earlier input
        if int(stale.stem.split("-")[1]) not in written:
            stale.unlink()
    ordered = [written[number] for number in sorted(written)]
    manifest = {"format": FORMAT, "shards": [shard.entry for shard in ordered],
                "items": sum(shard.entry["items"] for shard in ordered),
                "skipped": [list(skip) for shard in ordered for skip in shard.skipped],
                "meta": (meta() if callable(meta) else meta) or {}}
    partial = folder / f".manifest.{os.getpid()}.tmp"
    partial.write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    partial.replace(folder / "manifest.json")  # written last: its presence means every shard is whole
    rows = sum(shard.entry["rows"] for shard in ordered)
    log.info("prepared %d %s in %s (%d shards%s)", rows, describe, folder, len(ordered),
             f", {reused} reused from an interrupted preparation" if reused else "")
    store = open_store(folder)
    assert store is not None
    return store


def ragged(sequences: Sequence[Sequence[int]]) -> pa.Array:
    """A list<int32> Arrow column of id sequences."""
    return pa.array(sequences, type=pa.list_(pa.int32()))
