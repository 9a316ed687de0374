"""The text plug-in: sentence pairs (translation, dates), the source tokenized like the target."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from attend.data.modality import ColumnTexts, Modality, json_column, strings
from attend.data.store import ExampleStore, ragged
from attend.data.tokenizers.tokenizer import Tokenizer, tokenizer_from_state


class TextModality(Modality):
    """Records are ``(source, target)`` pairs, or ``(source, target, alignment)`` (``DatePairs``: each target
    character's source span), which evaluation batches carry as ``alignments``; ``tokenizer`` tokenizes the source."""

    name = "text"
    unit = example_unit = "pairs"
    shard_size = 20000  # pairs an encoded shard: tokenizing is fast, and few shards open fast
    source_column = "source"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_id

    def tokenizers(self) -> dict[str, Tokenizer]:
        return {"source": self.tokenizer}

    def fit(self, records: ExampleStore) -> None:
        if not self.tokenizer.is_fitted:
            self.tokenizer.fit(ColumnTexts(records, "source"))

    def record_columns(self, pairs: list[tuple]) -> dict[str, Any]:
        columns = {
            "source": strings([pair[0] for pair in pairs]),
            "references": pa.array([[pair[1]] for pair in pairs], type=pa.list_(pa.string())),
        }
        if pairs and len(pairs[0]) > 2:
            columns["alignment"] = json_column([pair[2] for pair in pairs])
        return columns

    def encode(self, records: ExampleStore, rows: list[int]) -> tuple[dict[str, Any], list]:
        src = [self.tokenizer.encode(records.value("source", row)) for row in rows]
        columns = {"row": rows, "src": ragged(src), "source_size": pa.array([len(s) for s in src], type=pa.int32())}
        return columns, []

    def example(self, encoded: ExampleStore, row: int, records: ExampleStore, record_row: int, train: bool
                ) -> dict[str, Any]:
        example: dict[str, Any] = {"src": encoded.ids("src", row)}
        if not train and "alignment" in records.column_names:
            spans = json.loads(records.value("alignment", record_row))
            example["alignments"] = [None if span is None else tuple(span) for span in spans]
        return example

    def describe(self, records: ExampleStore, record_row: int) -> str:
        source, target = records.value("source", record_row), records.value("references", record_row)[0]
        return f"pair {records.value('index', record_row)} ({source[:40]!r} -> {target[:40]!r})"

    def file_stamps(self, records: ExampleStore) -> None:
        return None

    def encoder_kwargs(self) -> dict[str, int]:
        return {"vocab_size": self.tokenizer.vocab_size, "pad_id": self.tokenizer.pad_id}

    def readable_source(self, batch: dict[str, Any], index: int) -> list[str]:
        """One readable piece per source position."""
        length = int(batch["src_lengths"][index])
        return self.tokenizer.tokens(batch["src"][index, :length].tolist())

    def sources_to_examples(self, sources: list[str]) -> list[dict[str, Any]]:
        return [{"src": self.tokenizer.encode(text) or [self.tokenizer.unk_id]} for text in sources]

    def state_dict(self) -> dict[str, Any]:
        return {"src_tokenizer": self.tokenizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tokenizer = tokenizer_from_state(state["src_tokenizer"])
