"""Tokenized translation pairs stored flat, and the collate function that pads them."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import Dataset


class Ragged:
    """Many int sequences in one flat array plus offsets.

    Compact (4 bytes an id, no per-id Python objects, so forked workers share it) and fast to
    slice: a batch costs a few microseconds an example, unlike per-example tensor ops.
    """

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        self.values = array("i", (i for s in sequences for i in s))
        self.offsets = array("q", [0])
        for s in sequences:
            self.offsets.append(self.offsets[-1] + len(s))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> list[int]:
        return self.values[self.offsets[index] : self.offsets[index + 1]].tolist()

    @property
    def lengths(self) -> torch.Tensor:
        offsets = torch.tensor(self.offsets, dtype=torch.long)
        return offsets[1:] - offsets[:-1]


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


class TargetCollate:
    """What every task's collate function holds: the ids that pad, start and end the targets."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int) -> None:
        self.pad_id = pad_id
        self.bos_id = bos_id
        self.eos_id = eos_id

    def targets(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        """The batch's target fields (see ``target_fields``)."""
        return target_fields(examples, self.pad_id, self.bos_id, self.eos_id)


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


def target_fields(examples: list[dict[str, Any]], pad_id: int, bos_id: int, eos_id: int) -> dict[str, Any]:
    """What every task's batch holds of its targets: ``tgt`` = bos + ids + eos padded, lengths, ids, texts."""
    tgt = [[bos_id, *e["tgt"], eos_id] for e in examples]
    return {
        "tgt": _pad(tgt, pad_id),  # (B, T)
        "tgt_lengths": torch.tensor([len(t) for t in tgt], dtype=torch.long),  # (B,)
        "ids": torch.tensor([e["id"] for e in examples], dtype=torch.long),  # (B,)
        "sources": [e["source"] for e in examples],
        "references": [e["reference"] for e in examples],
        "num_target_tokens": sum(len(t) - 1 for t in tgt),  # predicted tokens (eos, not bos)
    }


def _pad(sequences: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B, max_len) long tensor, right-padded with ``pad_id``."""
    width = max((len(s) for s in sequences), default=0)
    return torch.tensor([s + [pad_id] * (width - len(s)) for s in sequences], dtype=torch.long).view(
        len(sequences), width
    )
