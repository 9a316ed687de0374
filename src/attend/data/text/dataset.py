"""Tokenized translation pairs, and the collate function that pads them."""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import Dataset

from attend.data.collate import TargetCollate, _pad
from attend.data.store import ExampleStore, Shard, prepared_store, ragged, store_folder


class TranslationDataset(Dataset):
    """One split of token-id pairs and their raw text, read from an example store (``attend.data.store``).

    Store columns: ``index`` (position in the split as read: the example's ``id``), ``src`` and ``tgt``
    (list<int32> ids without bos/eos), ``source`` and ``reference`` (raw text), and for sources that know them
    ``alignment`` (JSON: for each reference character, the [start, end) span of source characters it comes
    from, or null). Nothing but the mapped files and two length arrays is held in memory.
    """

    def __init__(self, store: ExampleStore) -> None:
        self.store = store
        self.has_alignments = "alignment" in store.column_names

    @classmethod
    def from_pairs(
        cls,
        src: Sequence[Sequence[int]],
        tgt: Sequence[Sequence[int]],
        sources: list[str],
        references: list[str],
        ids: Sequence[int] | None = None,
        alignments: list[list[tuple[int, int] | None]] | None = None,
        folder: Path | None = None,
    ) -> TranslationDataset:
        """A dataset of pairs already in memory, in a store of its own (``folder``; a temporary one by default)."""
        if not len(src) == len(tgt) == len(sources) == len(references):
            raise ValueError("src, tgt, sources and references must have the same length")
        if alignments is not None and len(alignments) != len(src):
            raise ValueError("alignments must have one entry per example")
        ids = list(range(len(src))) if ids is None else [int(i) for i in ids]
        rows = list(zip(ids, src, tgt, sources, references, alignments or [None] * len(src), strict=True))

        def prepare(chunk: list[tuple], first: int) -> Shard:
            return Shard(pair_columns(chunk, with_alignments=alignments is not None))

        key = hashlib.sha1(pickle.dumps(rows)).hexdigest()
        return cls(prepared_store(folder or store_folder(None, "pairs", key), rows, prepare, describe="pairs"))

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, index: int) -> dict[str, Any]:
        names = ("src", "tgt", "index", "source", "reference", "alignment")
        src, tgt, position, source, reference, *alignment = self.store.row(index, names[: 5 + self.has_alignments])
        example = {"src": src, "tgt": tgt, "id": position, "source": source, "reference": reference}
        if alignment:
            example["alignment"] = [None if span is None else tuple(span) for span in json.loads(alignment[0])]
        return example

    @property
    def ids(self) -> list[int]:
        """Each example's position in the split as read."""
        return self.store.column("index").tolist()

    def side_lengths(self, side: str) -> torch.Tensor:
        """(N,) token count of every example's ``side`` ("src" or "tgt"), without bos/eos."""
        return torch.from_numpy(self.store.list_lengths(side).astype(np.int64))

    def lengths(self) -> torch.Tensor:
        """Bucketing length per example: the longer of source and target (with bos/eos)."""
        return torch.maximum(self.side_lengths("src"), self.side_lengths("tgt") + 2)


def pair_columns(rows: list[tuple], with_alignments: bool) -> dict[str, Any]:
    """Store columns of (id, src ids, tgt ids, source, reference, alignment) rows."""
    columns: dict[str, Any] = {
        "index": pa.array([row[0] for row in rows], type=pa.int64()),
        "src": ragged([row[1] for row in rows]),
        "tgt": ragged([row[2] for row in rows]),
        "source": pa.array([row[3] for row in rows], type=pa.string()),
        "reference": pa.array([row[4] for row in rows], type=pa.string()),
    }
    if with_alignments:
        columns["alignment"] = pa.array([json.dumps(row[5]) for row in rows], type=pa.string())
    return columns


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
