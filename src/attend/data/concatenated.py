"""Long training utterances made of short ones: several training examples back to back, as one more example.

A speech recogniser trained on prompts of a second or two derails on a ten-second test utterance: its attention
and its CTC head never met one. Joining training utterances (their features along time, their transcripts with a
space) gives the split long examples without new audio, as long-form recipes do (e.g. Narayanan et al. 2019,
"Recognizing long-form speech using streaming end-to-end models").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from attend.data.dataset import StoreDataset


@dataclass
class Concatenation:
    """``data.concatenate``: ``fraction`` x the training examples are added, each the join of between
    ``min_parts`` and ``max_parts`` training examples drawn at random (with the seed, once a run); 0: off."""

    fraction: float = 0.0
    min_parts: int = 2
    max_parts: int = 4

    def __post_init__(self) -> None:
        if not self.fraction >= 0.0:
            raise ValueError(f"data.concatenate.fraction must be >= 0 (0: off), got {self.fraction}")
        if not 2 <= self.min_parts <= self.max_parts:
            raise ValueError(f"data.concatenate needs 2 <= min_parts <= max_parts, got min_parts={self.min_parts} "
                             f"and max_parts={self.max_parts}")


class ConcatenatedExamples(Dataset):
    """The training examples of ``base``, then ``round(fraction x len(base))`` joined ones. A joined example's
    parts are read as ``base`` reads them (each with its own speed and SpecAugment masks when training); its features
    are theirs along time, its target the tokenizer's ids of their references joined by a space, its source the
    parts' sources joined by " + ". Parts are added while the joined example stays within ``max_source_len`` (feature
    frames) and ``max_target_len`` (tokens), so the length filter's limits hold for joined examples too."""

    def __init__(self, base: StoreDataset, options: Concatenation, tokenizer, seed: int,
                 max_source_len: int | None = None, max_target_len: int | None = None) -> None:
        self.base = base
        self.tokenizer = tokenizer
        sources = base.source_sizes()
        count = round(options.fraction * len(base)) if len(base) >= options.min_parts else 0
        generator = np.random.default_rng(seed)
        self.groups: list[list[int]] = []
        for _ in range(count):
            wanted = int(generator.integers(options.min_parts, options.max_parts + 1))
            drawn = generator.choice(len(base), size=wanted, replace=False).tolist()
            self.groups.append(_within_limits(drawn, sources, base.target_sizes, max_source_len, max_target_len))

    def __len__(self) -> int:
        return len(self.base) + len(self.groups)

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index < len(self.base):
            return self.base[index]
        parts = [self.base[i] for i in self.groups[index - len(self.base)]]
        reference = " ".join(part["reference"] for part in parts)
        joined = dict(parts[0])  # id and corpus of its first part
        joined.update(
            src=torch.cat([part["src"] for part in parts], dim=0),
            tgt=self.tokenizer.encode(reference),
            source=" + ".join(str(part["source"]) for part in parts),
            reference=reference,
        )
        return joined

    def lengths(self) -> torch.Tensor:
        """Bucketing length per example: a joined example's is the sum of its parts' (a space more per join)."""
        base = self.base.lengths()
        joined = [int(base[group].sum()) + len(group) - 1 for group in self.groups]
        return torch.cat([base, torch.tensor(joined, dtype=torch.long)])

    def corpus_counts(self) -> dict[str, int]:
        return self.base.corpus_counts()


def _within_limits(parts: list[int], sources: np.ndarray, targets: np.ndarray, max_source_len: int | None,
                   max_target_len: int | None) -> list[int]:
    """The leading parts whose join stays within the limits (at least one part)."""
    kept, frames, tokens = [parts[0]], int(sources[parts[0]]), int(targets[parts[0]])
    for part in parts[1:]:
        frames, tokens = frames + int(sources[part]), tokens + int(targets[part]) + 1
        if (max_source_len is not None and frames > max_source_len) or (
                max_target_len is not None and tokens > max_target_len):
            break
        kept.append(part)
    return kept
