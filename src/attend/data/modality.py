"""The modality plug-in: the only part of the data pipeline (``DataModule``) that differs between text, images and
audio. A ``Modality`` says what the stages do with its kind of source:

- ``record_columns(records)``: the source's records (pairs, images with captions, utterances) as columns of the
  records store: ``references`` (list of str: the texts to predict) always; ``key`` and ``path`` where it has them.
- ``encode(records, rows)``: a chunk of records-store rows as columns of the encoded store (token ids, pixels,
  features) with ``row`` (the records row) and ``source_size`` (what the length filter and the batches count:
  tokens, feature frames; 0 for images), plus the rows it could not read as ``Skipped`` items.
- ``example(encoded, row, records, record_row, train)``: what one example gives the batch besides its target:
  ``src`` (token ids, an image tensor, features) and the extra fields its metrics read; augmentation happens here.
- ``readable_source(batch, index)``: a row's source as a person reads it (tokens, an image, a spectrogram), for plots.
- ``sources_to_examples(paths_or_texts)``: what predict.py was given, as examples.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa

from attend.data.bad_samples import Skipped
from attend.data.store import ExampleStore, file_stamp
from attend.data.tokenizers.tokenizer import Tokenizer


class Modality:
    """The plug-in contract (see the module docstring); the defaults fit a modality without files or tokenizers."""

    name = ""  # what the data gives the encoder: "text", "image", "audio" (the config check matches the encoder's)
    unit = "records"  # what a record is, in counts and messages: "pairs", "images", "utterances"
    example_unit = "records"  # what a training example is, where it differs (an image's captions)
    several_references = False  # each example scored against all its record's references (captions)
    marks_unseen = False  # evaluation examples say whether any reference occurs among the training texts
    source_has_size = True  # whether the length filter checks source_size (an image has none)
    source_unit = "tokens"  # what source_size counts, in the filter's messages
    src_lengths = True  # whether batches carry src_lengths (images: every cell is real)
    read_error: type[Exception] = ValueError  # raised when no record of a split can be read
    source_column = "key"  # the records column batches carry as ``sources`` (a text's source sentence)
    shard_size = 512  # records an encoded shard holds: a few seconds of one worker's work, little lost on a resume
    pad_id = 0  # what pads token-id sources

    def bind(self, source) -> None:
        """The source whose records this plug-in encodes (images are loaded through it)."""
        self.source = source

    def tokenizers(self) -> dict[str, Tokenizer]:
        """Tokenizers of the source, by role ("source"), beside the data module's target tokenizer."""
        return {}

    def fit(self, records: ExampleStore) -> None:
        """Fit the source's tokenizers on the training records (only when they are not fitted yet)."""

    def settings(self) -> dict[str, Any]:
        """What the encoded columns depend on besides the records and tokenizers (an image size, a front end); the
        encoded store keeps it in its metadata too."""
        return {}

    def file_stamps(self, records: ExampleStore) -> list | None:
        """Size and modification time of each record's file, so a changed file gives a new encoded store."""
        if "path" not in records.column_names:
            return None
        return [file_stamp(records.value("path", row)) for row in range(len(records))]

    def record_columns(self, records: list[Any]) -> dict[str, Any]:
        raise NotImplementedError

    def encode(self, records: ExampleStore, rows: list[int]) -> tuple[dict[str, Any], list[Skipped]]:
        raise NotImplementedError

    def example(self, encoded: ExampleStore, row: int, records: ExampleStore, record_row: int, train: bool
                ) -> dict[str, Any]:
        raise NotImplementedError

    def describe(self, records: ExampleStore, record_row: int) -> str:
        """How a skip names a record: its key, and its file where it has one."""
        key = records.value("key", record_row)
        path = records.value("path", record_row) if "path" in records.column_names else None
        return f"{self.unit[:-1]} {key}" + (f" ({path})" if path else "")

    def prepare_split(self, encoded: ExampleStore, split: str, datamodule) -> None:
        """What a split needs beyond its encoded store once it is open (stored image features)."""

    def use_frozen_features(self, extractor, datamodule) -> None:
        """Batch an encoder's frozen features instead of its input (only images have any)."""

    def encoder_kwargs(self) -> dict[str, int]:
        return {}

    def readable_source(self, batch: dict[str, Any], index: int) -> Any:
        raise NotImplementedError

    def sources_to_examples(self, sources: list[str]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Use the source tokenizers a checkpoint saved (``state_dict``)."""


class ColumnTexts:
    """The texts of a records-store column (a text or a list of texts a row), re-read on each iteration
    (SentencePiece may read them twice)."""

    def __init__(self, records: ExampleStore, column: str) -> None:
        self.records, self.column = records, column

    def __iter__(self):
        for row in range(len(self.records)):
            texts = self.records.value(self.column, row)
            yield from [texts] if isinstance(texts, str) else texts


def file_skip(path: str | None, key: str, problem: Exception, corrupt: str) -> Skipped:
    """The skip of a record whose file could not be read: "missing file" when the file does not exist, else
    ``corrupt`` ("corrupt image", "corrupt audio")."""
    reason = "missing file" if path and not os.path.exists(path) else corrupt
    return Skipped(str(path or key), reason, str(problem))


def strings(values: list[str]) -> pa.Array:
    return pa.array(values, type=pa.string())


def json_column(values: list[Any]) -> pa.Array:
    """A string column of JSON values (alignments, scene objects): read back with ``json.loads``."""
    return strings([json.dumps(value) for value in values])


def path_or_none(path: str | os.PathLike | None) -> str | None:
    return None if path is None else str(path)
