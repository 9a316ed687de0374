"""One collate function for every modality: pads or stacks each field of the examples into a batch."""

from __future__ import annotations

from typing import Any

import torch

from attend.data.tokenizers.tokenizer import Tokenizer


class Collate:
    """Examples -> a batch dict, field by field. ``src``: token-id lists right-padded with the plug-in's ``pad_id``,
    tensors (features (N, F)) zero-padded along their first axis, both with ``src_lengths`` (B,), or (the plug-in's
    ``src_lengths`` False: images) stacked; the ``target_fields``; any other field: tensors stacked, bools a (B,)
    bool tensor, anything else a list (alignments, scene objects)."""

    def __init__(self, tokenizer: Tokenizer, plugin) -> None:
        self.pad_id, self.bos_id, self.eos_id = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id
        self.plugin = plugin

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = {**self.sources(examples), **target_fields(examples, self.pad_id, self.bos_id, self.eos_id)}
        for field in examples[0] if examples else ():
            if field in ("src", "tgt", "id", "source", "reference"):
                continue
            values = [example[field] for example in examples]
            if all(isinstance(value, torch.Tensor) for value in values):
                batch[field] = torch.stack(values)
            elif all(isinstance(value, bool) for value in values):
                batch[field] = torch.tensor(values, dtype=torch.bool)
            else:
                batch[field] = values
        return batch

    def sources(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        src = [example["src"] for example in examples]
        if not self.plugin.src_lengths:
            return {"src": torch.stack(src)}  # (B, C, H, W)
        lengths = [len(s) for s in src]
        if src and isinstance(src[0], torch.Tensor):
            padded = src[0].new_zeros(len(src), max(lengths), *src[0].shape[1:])  # (B, N, F)
            for row, value in enumerate(src):
                padded[row, : lengths[row]] = value
        else:
            padded = pad(src, self.plugin.pad_id)  # (B, S)
        return {"src": padded, "src_lengths": torch.tensor(lengths, dtype=torch.long)}


def target_fields(examples: list[dict[str, Any]], pad_id: int, bos_id: int, eos_id: int) -> dict[str, Any]:
    """What every task's batch holds of its targets: ``tgt`` = bos + ids + eos padded, lengths, ids, texts."""
    tgt = [[bos_id, *e["tgt"], eos_id] for e in examples]
    return {
        "tgt": pad(tgt, pad_id),  # (B, T)
        "tgt_lengths": torch.tensor([len(t) for t in tgt], dtype=torch.long),  # (B,)
        "ids": torch.tensor([e["id"] for e in examples], dtype=torch.long),  # (B,)
        "sources": [e["source"] for e in examples],
        "references": [e["reference"] for e in examples],
        "num_target_tokens": sum(len(t) - 1 for t in tgt),  # predicted tokens (eos, not bos)
    }


def pad(sequences: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B, max_len) long tensor, right-padded with ``pad_id``."""
    width = max((len(s) for s in sequences), default=0)
    return torch.tensor([s + [pad_id] * (width - len(s)) for s in sequences], dtype=torch.long).view(
        len(sequences), width
    )
