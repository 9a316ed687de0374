"""Tokenized translation pairs, and the collate function that pads them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

from attend.data.collate import Ragged, TargetCollate, _pad


class TranslationDataset(Dataset):
    """Token ids (lists) and raw text of one split; ``ids`` are positions in the split as read.

    ``alignments`` (optional, from sources that know them, such as dates): for each example, for
    each reference character, the [start, end) span of source characters it comes from, or None.
    """

    def __init__(
        self,
        src: Sequence[Sequence[int]],
        tgt: Sequence[Sequence[int]],
        sources: list[str],
        references: list[str],
        ids: Sequence[int] | None = None,
        alignments: list[list[tuple[int, int] | None]] | None = None,
    ) -> None:
        if not len(src) == len(tgt) == len(sources) == len(references):
            raise ValueError("src, tgt, sources and references must have the same length")
        if alignments is not None and len(alignments) != len(src):
            raise ValueError("alignments must have one entry per example")
        self.src = Ragged(src)
        self.tgt = Ragged(tgt)
        self.sources = sources
        self.references = references
        self.ids = list(range(len(src))) if ids is None else [int(i) for i in ids]
        self.alignments = alignments

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> dict[str, Any]:
        example = {
            "src": self.src[index],
            "tgt": self.tgt[index],
            "id": self.ids[index],
            "source": self.sources[index],
            "reference": self.references[index],
        }
        if self.alignments is not None:
            example["alignment"] = self.alignments[index]
        return example

    def lengths(self) -> torch.Tensor:
        """Bucketing length per example: the longer of source and target (with bos/eos)."""
        return torch.maximum(self.src.lengths, self.tgt.lengths + 2)


class TranslationCollate(TargetCollate):
    """Pads examples into a batch dict; the target gets bos/eos; ``alignments`` when every example has one."""

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        src = [e["src"] for e in examples]
        batch = {
            "src": _pad(src, self.pad_id),  # (B, S)
            "src_lengths": torch.tensor([len(s) for s in src], dtype=torch.long),  # (B,)
            **self.targets(examples),
        }
        if examples and all("alignment" in e for e in examples):
            # lists of (start, end) tuples or None, which Lightning moves between devices as is
            batch["alignments"] = [e["alignment"] for e in examples]
        return batch
