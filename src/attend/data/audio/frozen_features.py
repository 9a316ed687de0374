"""A frozen speech encoder's outputs, computed once into the example store instead of at every training step.

A frozen encoder (encoder=whisper) gives the same outputs for the same log-mel frames, so running it on every batch
of every epoch is wasted work. Each utterance goes through it alone (no padding can enter), and its outputs are
stored as float16, one column per speed: speed perturbation stays meaningful (each training speed's frames are
encoded once, one picked each time an example is read); SpecAugment, drawn afresh each step, cannot be stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import pyarrow as pa
import torch
from torch import Tensor

from attend.data.store import ExampleStore, Shard, prepared_store


class AudioFeatureExtractor(Protocol):
    """An encoder's frozen part: one utterance's frames (N, F) -> its outputs (S, D); ``key`` (class, weights, the
    part) names it, ``frontend`` the class of front end whose frames it reads (``WhisperLogMel``)."""

    key: str
    frontend: str

    def __call__(self, frames: Tensor) -> Tensor: ...


def speed_column(speed: float) -> str:
    """The column of one speed's outputs: "1", "0.9", "1.1"."""
    return f"{speed:g}"


def feature_store(count: int, outputs_of: Callable[[int, float], Tensor], speeds: list[float], folder,
                  shard_size: int, workers: int, describe: str) -> ExampleStore:
    """The outputs of ``count`` utterances (``outputs_of(row, speed)`` -> (S, D)) at each speed, prepared when
    missing, in ``workers`` forked processes (each should run one torch thread: processes do not wait for each other
    at every operation, as threads do, so a busy core slows one of them only). Row r holds a column per speed
    (float16 bytes of (S, D)); ``meta`` holds D."""
    dims: dict[str, int] = {}

    def prepare(rows: list[int], first: int) -> Shard:
        columns = {}
        for speed in speeds:
            outputs = [outputs_of(row, speed).to(torch.float16) for row in rows]  # each (S, D)
            dims["dim"] = int(outputs[0].size(-1))
            columns[speed_column(speed)] = pa.array([out.contiguous().numpy().tobytes() for out in outputs],
                                                    type=pa.binary())
        return Shard(columns)

    return prepared_store(folder, range(count), prepare, shard_size=shard_size, workers=workers,
                          # forked workers record the width in their own memory: measured here on one utterance then
                          meta=lambda: {"dim": dims.get("dim") or int(outputs_of(0, speeds[0]).size(-1))},
                          describe=describe)


def stored_features(store: ExampleStore, row: int, speed: float = 1.0) -> Tensor:
    """(S, D) float32 outputs of one row at one speed."""
    half = np.frombuffer(store.buffer(speed_column(speed), row), dtype=np.float16)
    return torch.from_numpy(half.astype(np.float32)).view(-1, int(store.meta["dim"]))
