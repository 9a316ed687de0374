"""Utterances with tokenized transcripts, their log-mel features, and the collate function that pads them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from attend.data.audio import AudioReadError, Utterance, read_audio
from attend.data.collate import Ragged, TargetCollate
from attend.data.store import ExampleStore


class StoredFeatures:
    """Precomputed features of some rows of a feature store (``attend.data.audio.feature_store``), read one at a
    time from the memory-mapped shards: only row numbers and frame counts live in RAM, never the features.

    ``features[i]`` is row ``rows[i]``'s (frames, n_mels) float32 tensor (a copy, so callers may write to it);
    ``frames[i]`` its frame count. Pickles as the store's folder: loader workers map the files themselves.
    """

    def __init__(self, store: ExampleStore, rows: Sequence[int] | np.ndarray | None = None) -> None:
        self.store = store
        self.rows = np.arange(len(store), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        self.frames = store.column("frames").astype(np.int64)[self.rows]  # (n,)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Tensor:
        row, frames = int(self.rows[index]), int(self.frames[index])  # IndexError past the end ends iteration
        half = np.frombuffer(self.store.buffer("features", row), dtype=np.float16).reshape(frames, -1)  # (N, F)
        return torch.from_numpy(half.astype(np.float32))  # (N, F), copied out of the mapped file

    def subset(self, keep: Sequence[int]) -> StoredFeatures:
        """The features at positions ``keep`` (of this selection)."""
        return StoredFeatures(self.store, self.rows[np.asarray(keep, dtype=np.int64)])


class SpeechDataset(Dataset):
    """One example per utterance: features (frames, n_mels), transcript ids, key and reference text.

    ``features`` gives precomputed features from a memory-mapped store (``StoredFeatures``, in the order of
    ``utterances``) or is None, and then every access reads the audio and runs ``frontend`` (use DataLoader
    workers). ``augment`` (SpecAugment) draws fresh masks at every access.
    """

    def __init__(
        self,
        utterances: list[Utterance],
        targets: Sequence[Sequence[int]],
        frontend: nn.Module,
        features: StoredFeatures | None = None,
        augment: nn.Module | None = None,
    ) -> None:
        if len(utterances) != len(targets) or (features is not None and len(features) != len(utterances)):
            raise ValueError("utterances, targets and features must have the same length")
        self.utterances = utterances
        self.targets = Ragged(targets)
        self.frontend = frontend
        self.features = features
        self.augment = augment

    def __len__(self) -> int:
        return len(self.utterances)

    def __getitem__(self, index: int) -> dict[str, Any]:
        utterance = self.utterances[index]
        if self.features is not None:
            features = self.features[index]  # (N, F) float32
        else:
            features = compute_features(self.frontend, utterance.path)
        if self.augment is not None:
            features = self.augment(features)
        return {
            "features": features,
            "tgt": self.targets[index],
            "id": index,
            "source": utterance.key,
            "reference": utterance.text,
        }

    def lengths(self) -> Tensor:
        """Bucketing length per example: feature frames (from the store, else from the duration)."""
        if self.features is not None:
            return torch.from_numpy(self.features.frames.copy())  # (n,) int64
        rate = self.frontend.sample_rate
        return torch.tensor(
            [self.frontend.num_frames(int((u.duration or 0.0) * rate)) for u in self.utterances], dtype=torch.long
        )


@torch.no_grad()
def compute_features(frontend: nn.Module, path: str) -> Tensor:
    """Log-mel features (frames, n_mels) of one audio file, read at the front end's sample rate.

    Raises AudioReadError for a file that cannot be read and for one shorter than a single window.
    """
    waveform = read_audio(path, frontend.sample_rate)
    if frontend.num_frames(waveform.numel()) == 0:
        raise AudioReadError(
            f"{path}: {waveform.numel() / frontend.sample_rate * 1000:.1f} ms of audio is shorter than one "
            f"analysis window ({frontend.win_length / frontend.sample_rate * 1000:g} ms): nothing to recognise"
        )
    return frontend(waveform)


class SpeechCollate(TargetCollate):
    """Pads features to (B, N, F) with zeros (the mean after normalisation) and targets with bos/eos."""

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        lengths = [e["features"].size(0) for e in examples]
        dims = examples[0]["features"].size(1)
        src = torch.zeros(len(examples), max(lengths), dims)  # (B, N, F)
        for row, example in enumerate(examples):
            src[row, : lengths[row]] = example["features"]
        return {
            "src": src,
            "src_lengths": torch.tensor(lengths, dtype=torch.long),  # (B,) feature frames
            **self.targets(examples),
        }
