"""One dataset for every modality: examples read from the records and encoded stores, one row at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from attend.data.store import ExampleStore
from attend.data.tokenizers.sampling import SubwordSampler


def reference_offsets(encoded: ExampleStore) -> tuple[np.ndarray, np.ndarray]:
    """(per row, the position of its first reference among all references; every reference's token count)."""
    counts = encoded.list_lengths("target_lengths")
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return first, encoded.list_values("target_lengths").astype(np.int64)


def training_examples(encoded: ExampleStore) -> tuple[np.ndarray, np.ndarray]:
    """(N, 2) [encoded row, reference index] of one example per reference of every row, and each one's target
    token count (an image with five captions gives five examples)."""
    counts = encoded.list_lengths("target_lengths").astype(np.int64)
    rows = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    first, sizes = reference_offsets(encoded)
    which = np.arange(len(rows), dtype=np.int64) - np.repeat(first, counts)
    return np.stack([rows, which], axis=1), sizes


class StoreDataset(Dataset):
    """The examples of one split: ``examples`` (N, 2) holds each one's encoded-store row and which of its record's
    references is the target; rows are read from the memory-mapped stores. ``plugin.example`` gives the source side;
    the target, ``id`` (the record's position in its split), ``source`` and ``reference`` are common. A ``sampler``
    (training only: ``SubwordSampler``) segments the target, and a text source, anew each time an example is read."""

    def __init__(self, records: ExampleStore, encoded: ExampleStore, examples: np.ndarray, plugin, train: bool,
                 sampler: SubwordSampler | None = None) -> None:
        self.records = records
        self.encoded = encoded
        self.examples = np.asarray(examples, dtype=np.int64).reshape(-1, 2)
        self.plugin = plugin
        self.train = train
        self.sampler = sampler
        self.record_rows = encoded.column("row").astype(np.int64)
        first, sizes = reference_offsets(encoded)
        self.target_sizes = sizes[first[self.examples[:, 0]] + self.examples[:, 1]] if len(self.examples) else sizes[:0]
        self.unseen = "unseen" in encoded.column_names
        self.corpus = "corpus" in records.column_names  # several corpora (attend.data.corpora): batches say whose

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> dict[str, Any]:
        row, which = (int(value) for value in self.examples[index])
        record_row = int(self.record_rows[row])
        example = self.plugin.example(self.encoded, row, self.records, record_row, self.train)
        ids, lengths = self.encoded.ids("targets", row), self.encoded.ids("target_lengths", row)
        start = sum(lengths[:which])
        references = self.records.value("references", record_row)
        example.update(
            tgt=ids[start : start + lengths[which]],
            id=self.records.value("index", record_row),
            source=self.records.value(self.plugin.source_column, record_row),
            reference=references if self.plugin.several_references else references[which],
        )
        if self.sampler is not None:
            example["tgt"] = self.sampler.target(references[which], example["tgt"])
            if self.sampler.source_tokenizer is not None:
                example["src"] = self.sampler.source(example["source"], example["src"])
        if self.unseen:
            example["unseen"] = self.encoded.value("unseen", row)
        if self.corpus:
            example["corpus"] = self.records.value("corpus", record_row)
        return example

    def corpus_counts(self) -> dict[str, int]:
        """Examples per corpus, in the records' order."""
        names = self.records.column("corpus")[self.record_rows[self.examples[:, 0]]].tolist()
        return {name: names.count(name) for name in dict.fromkeys(names)}

    def lengths(self) -> torch.Tensor:
        """Bucketing length per example: the longer of source size and target (with bos/eos)."""
        sources = self.encoded.column("source_size").astype(np.int64)[self.examples[:, 0]]
        return torch.from_numpy(np.maximum(sources, self.target_sizes + 2))
