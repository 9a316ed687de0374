"""Log-mel features and audio durations of a split, prepared once into a memory-mapped example store.

Why a store and not tensors in RAM: 960 h of 80-mel float16 features is ~55 GB, which no loader should hold;
a store is prepared in parallel once per machine, keyed by source, front end and utterance keys, and every
loader worker and DDP rank maps the same files (``attend.data.store``). Unreadable audio becomes a skip that
the store keeps, so a cached start reports the same bad samples without opening an audio file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch
from torch import nn

from attend.data.audio import AudioReadError, Utterance, audio_duration
from attend.data.audio.dataset import compute_features
from attend.data.bad_samples import BadSamples
from attend.data.cache import file_skip, report_store_skips
from attend.data.store import ExampleStore, Shard, Skip, prepared_store

SHARD_SIZE = 256  # utterances per shard: ~65 MB of LibriSpeech features, a few seconds of work for one process


def feature_store(
    folder: Path, utterances: list[Utterance], frontend: nn.Module, workers: int = 0, shard_size: int = SHARD_SIZE
) -> ExampleStore:
    """The store of ``utterances``' features, prepared by ``workers`` processes when missing or damaged.

    Columns: ``index`` (int64, position in ``utterances``), ``features`` (binary: float16 (frames, n_mels) in
    C order), ``frames`` (int32). Unreadable audio is a skip (see ``report_skips``).
    """

    def prepare(chunk: list[Utterance], first: int) -> Shard:
        with _one_thread():
            read = lambda utterance: compute_features(frontend, utterance.path).to(torch.float16).contiguous()
            index, halves, skipped = _read_chunk(chunk, first, read)  # halves: (N, F) float16 each
        columns = {
            "index": pa.array(index, pa.int64()),
            "features": pa.array([h.numpy().tobytes() for h in halves], pa.binary()),
            "frames": pa.array([h.size(0) for h in halves], pa.int32()),
        }
        return Shard(columns, skipped)

    return prepared_store(folder, utterances, prepare, shard_size, workers, describe="utterance features")


def duration_store(folder: Path, utterances: list[Utterance], workers: int = 0, shard_size: int = SHARD_SIZE):
    """The store of ``utterances``' durations from their audio headers (``index`` int64, ``duration`` float64
    seconds): without precomputed features a start reads no audio file once it exists, and a missing or
    corrupt file is still a skip at start-up rather than a failure mid-epoch."""

    def prepare(chunk: list[Utterance], first: int) -> Shard:
        index, seconds, skipped = _read_chunk(chunk, first, lambda u: audio_duration(u.path))
        return Shard({"index": pa.array(index, pa.int64()), "duration": pa.array(seconds, pa.float64())}, skipped)

    return prepared_store(folder, utterances, prepare, shard_size, workers, describe="utterance durations")


def report_skips(store: ExampleStore, utterances: list[Utterance], bad_samples: BadSamples | None, split: str) -> None:
    """Tell ``bad_samples`` what preparing the store skipped (every run, cached or not); AudioReadError when
    there were utterances and none could be read."""
    report_store_skips(bad_samples, split, store.skipped, len(utterances), len(store), "utterance", AudioReadError)


def _read_chunk(
    chunk: list[Utterance], first: int, read: Callable[[Utterance], Any]
) -> tuple[list[int], list[Any], list[Skip]]:
    """``read`` of every utterance: positions (``first`` + offset) and values of those read, skips of the rest."""
    index, values, skipped = [], [], []
    for offset, utterance in enumerate(chunk):
        try:
            values.append(read(utterance))
        except AudioReadError as problem:
            skipped.append(file_skip(utterance.path, utterance.key, problem, "corrupt audio"))
            continue
        index.append(first + offset)
    return index, values, skipped


@contextmanager
def _one_thread() -> Iterator[None]:
    """One torch thread while preparing: forked workers each take a core, and more threads would oversubscribe
    them; restored after, for a shard prepared in the main process."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
