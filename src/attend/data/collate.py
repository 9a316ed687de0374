"""What every task's batches share: ragged id storage, target padding with bos/eos."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import torch


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


class TargetCollate:
    """What every task's collate function holds: the ids that pad, start and end the targets."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int) -> None:
        self.pad_id = pad_id
        self.bos_id = bos_id
        self.eos_id = eos_id

    def targets(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        """The batch's target fields (see ``target_fields``)."""
        return target_fields(examples, self.pad_id, self.bos_id, self.eos_id)


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
