"""Utterances with tokenized transcripts, their log-mel features, and the collate function that pads them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from attend.data.audio import AudioReadError, Utterance, read_audio
from attend.data.collate import Ragged, TargetCollate


class SpeechDataset(Dataset):
    """One example per utterance: features (frames, n_mels), transcript ids, key and reference text.

    ``features`` holds precomputed features (float16, one tensor per utterance) or is None, and
    then every access reads the audio and runs ``frontend`` (corpora too large to keep in memory:
    use DataLoader workers). ``augment`` (SpecAugment) draws fresh masks at every access.
    """

    def __init__(
        self,
        utterances: list[Utterance],
        targets: Sequence[Sequence[int]],
        frontend: nn.Module,
        features: list[Tensor] | None = None,
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
            features = self.features[index].float()  # (N, F)
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
        """Bucketing length per example: feature frames (from the features, else from the duration)."""
        if self.features is not None:
            return torch.tensor([f.size(0) for f in self.features], dtype=torch.long)
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
