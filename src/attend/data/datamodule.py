"""One LightningDataModule for every task: the same stages for text, images and audio, a plug-in for what differs.

    source --records store--> tokenizers fitted --encoded store--> length filter --> StoreDataset --> Collate

docs/design.md ("Data") describes each stage. A cached start reads no source and fits no tokenizer; skips are data:
the records store, the encoded store and the length filter each give theirs, reported on every start.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pyarrow as pa
from torch.utils.data import DataLoader

from attend.data.bad_samples import BadSamples, Skipped
from attend.data.bucketing import BucketBatchSampler
from attend.data.collate import Collate
from attend.data.corpora import Corpora, Tagged
from attend.data.dataset import StoreDataset, training_examples
from attend.data.modality import ColumnTexts, Modality
from attend.data.splitting import SPLITS
from attend.data.store import DamagedStoreError, ExampleStore, Shard, open_store, prepared_store, source_settings
from attend.data.store import store_folder as _store_folder
from attend.data.tokenizers.sampling import SubwordSampler
from attend.data.tokenizers.tokenizer import Tokenizer, states_from_text, states_to_text, tokenizer_from_state
from attend.data.unseen import caption_set, is_unseen

log = logging.getLogger("attend.data")
RECORDS_SHARD = 20_000  # records a records-store shard holds (they are small: text and file names)


@dataclass
class Loader:
    """``data.loader``: training batches of similar length (``bucket=False``: at random), at most ``batch_size``
    examples and ``max_tokens`` padded length units; evaluation batches of ``eval_batch_size``, sorted by length."""

    batch_size: int = 32
    eval_batch_size: int | None = None
    max_tokens: int | None = None
    num_workers: int = 0
    bucket: bool = True


def default_prepare_workers() -> int:
    """Processes that prepare data (``data.prepare_workers``, null: this): the CPU cores, at most 8."""
    return min(len(os.sched_getaffinity(0)), 8)


def tokenizer_key(tokenizer: Tokenizer, settings_only: bool = False) -> Any:
    """What token ids depend on: a fitted tokenizer's whole state, else (or ``settings_only``) the class and the
    settings training fits it from."""
    if tokenizer.is_fitted and not settings_only:
        return hashlib.sha1(pickle.dumps(tokenizer.state_dict())).hexdigest()
    return [type(tokenizer).__name__, tokenizer.settings()]


class DataModule(L.LightningDataModule):
    """Examples of ``source`` through the ``modality`` plug-in, targets tokenized by ``tokenizer`` (fitted on the
    training references unless fitted already); stores are prepared by ``prepare_workers`` processes (None: the CPU
    cores, at most 8) in shards of ``shard_size`` records (None: the plug-in's for encoded stores, 20,000 for
    records stores), under ``cache_dir`` (None: a temporary folder).

    Batches: ``src`` (ids (B, S), images (B, 3, H, W) or features (B, N, F)), ``src_lengths`` (B,) except for
    images, ``tgt`` (B, T) = bos + ids + eos, ``tgt_lengths``, ``ids`` (each example's position in its split),
    ``sources`` and ``references`` (text, or lists of captions), and the fields the plug-in adds.
    """

    def __init__(self, source, modality: Modality, tokenizer: Tokenizer, loader: Loader | dict[str, Any] | None = None,
                 max_source_len: int | None = None, max_target_len: int | None = None, seed: int = 1234,
                 cache_dir: str | os.PathLike | None = None, on_error: str = "skip", max_skip_fraction: float = 0.1,
                 prepare_workers: int | None = None, shard_size: int | None = None,
                 subword_sampling: float | None = None) -> None:
        super().__init__()
        self.source = source
        self.plugin = modality
        modality.bind(source)
        self.tokenizer = tokenizer
        self.loader = loader if isinstance(loader, Loader) else Loader(**dict(loader or {}))
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len
        # training pairs segmented anew each time they are drawn (SubwordSampler); None: the stored segmentation
        self.subword_sampling = subword_sampling
        self._subword_sampler()  # a wrong setting fails here, before any data is prepared
        self.seed = seed
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.bad_samples = BadSamples(on_error, max_skip_fraction)
        self.prepare_workers = default_prepare_workers() if prepare_workers is None else prepare_workers
        self.shard_size = shard_size
        self.records: dict[str, ExampleStore] = {}
        self.encoded: dict[str, ExampleStore] = {}
        self.datasets: dict[str, StoreDataset] = {}
        self.dropped = 0  # training examples the length filter left out
        self._splits: dict[str, Any] | None = None
        self._stamps: dict[Path, list | None] = {}  # records store -> its records' file stamps
        # the splits whose examples are encoded and set up; evaluating a checkpoint on another data set needs only
        # "test" (``only_splits``): the other data set's training features are never computed
        self.splits: tuple[str, ...] = SPLITS

    @property
    def modality(self) -> str:
        """What the data gives the encoder: "text", "image" or "audio"."""
        return self.plugin.name

    def only_splits(self, *splits: str) -> None:
        """Encode and set up only these splits (before ``setup``). Without "train" nothing fits the tokenizers: they
        must come from a checkpoint (``load_tokenizers``). Every records store is still written (text and file
        names: a source is read whole anyway)."""
        unknown = [split for split in splits if split not in SPLITS]
        if unknown or not splits:
            raise ValueError(f"splits are {', '.join(SPLITS)}; got {', '.join(splits) or 'none'}")
        self.splits = tuple(split for split in SPLITS if split in splits)

    # stages ----------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Prepare every store once (local rank 0; other processes wait on the stores' locks and open them)."""
        self._open_stores()

    def setup(self, stage: str | None = None) -> None:
        """Open (preparing first, if needed) every split's stores, filter, report the skips (idempotent)."""
        if self.datasets:
            return
        self._open_stores()
        self.bad_samples = BadSamples(self.bad_samples.on_error, self.bad_samples.max_skip_fraction, self.splits)
        sampler = self._subword_sampler()  # bound to the tokenizers of now: loading others runs setup again
        for split in self.splits:
            self._report_store_skips(split)
            examples = self._examples(split)
            self.datasets[split] = StoreDataset(self.records[split], self.encoded[split], examples, self.plugin,
                                                train=split == "train",
                                                sampler=sampler if split == "train" else None)
        sizes = ", ".join(f"{split} {len(self.datasets[split])}" for split in self.splits)
        log.info("%s: %s examples; vocabulary %d", self.plugin.unit, sizes, self.tokenizer.vocab_size)
        for split in self.splits if self.corpora else ():
            counts = self.datasets[split].corpus_counts()
            log.info("%s examples by corpus: %s", split, ", ".join(f"{name} {n}" for name, n in counts.items()))
        self.bad_samples.log_summary()

    def _subword_sampler(self) -> SubwordSampler | None:
        if self.subword_sampling is None:
            return None
        return SubwordSampler(self.subword_sampling, self.tokenizer, self.plugin.tokenizers().get("source"),
                              self.max_source_len, self.max_target_len)

    @property
    def corpora(self) -> list[str]:
        """The corpus names of a ``Corpora`` source, in order (known before ``setup``); [] for a single source."""
        return list(self.source.sources) if isinstance(self.source, Corpora) else []

    def store_folder(self, kind: str, *key_parts: Any) -> Path:
        """Where the store of ``kind`` for these settings lives: keyed by the source's class and settings."""
        return _store_folder(self.cache_dir, kind, type(self.source).__name__, source_settings(self.source), *key_parts)

    def _open_stores(self) -> None:
        if self.encoded:
            return
        self.records = {split: self._records_store(split) for split in SPLITS}
        self._splits = None  # the source's records, read only to prepare the records stores: not kept
        if "train" not in self.splits and not self._fitted():
            raise RuntimeError(f"only the {', '.join(self.splits)} split(s) are set up, and nothing fits the "
                               "tokenizers: load them from a checkpoint first (load_tokenizers)")
        tokenizers = self.tokenizers()
        key = [tokenizer_key(t) for t in tokenizers.values()]
        trained_key = [tokenizer_key(t, settings_only=True) for t in tokenizers.values()]
        for split in self.splits:  # train first: it fits the tokenizers the other splits are encoded with
            if trained_key != key and (store := self._store_trained_with_these_tokenizers(split, trained_key)):
                self.encoded[split] = store  # evaluating a checkpoint: the stores its training prepared
            else:
                self.encoded[split] = self._encoded_store(split, key)
            if not self._fitted():
                self.load_tokenizers(states_from_text(self.encoded[split].meta["tokenizers"],
                                                      f"the example store {self.encoded[split].folder}"))
                key = [tokenizer_key(t, settings_only=True) for t in self.tokenizers().values()]
            self.plugin.prepare_split(self.encoded[split], split, self)

    def _records_store(self, split: str) -> ExampleStore:
        """The split's records (``index``: position among them; bad items: skips), read only when missing."""
        plugin = self.plugin

        def prepare(items: list[tuple[Any, int | None]], first: int) -> Shard:
            records = [item for item, position in items if position is not None]
            tagged = [record for record in records if isinstance(record, Tagged)]  # Corpora: several in one
            columns = plugin.record_columns([record.record for record in tagged] if tagged else records)
            if tagged:
                columns["corpus"] = pa.array([record.corpus for record in tagged], type=pa.string())
            columns["index"] = pa.array([position for _, position in items if position is not None], type=pa.int64())
            return Shard(columns, [tuple(item) for item, position in items if position is None])

        return prepared_store(self.store_folder("records", split), self._numbered(split), prepare,
                              shard_size=self.shard_size or RECORDS_SHARD, workers=0,
                              describe=f"{split} {plugin.unit}")

    def _numbered(self, split: str):
        """The split's items (records and Skipped ones) with each record's position among the records."""
        position = 0
        for item in self._source_items(split):
            yield item, None if isinstance(item, Skipped) else position
            position += not isinstance(item, Skipped)

    def _source_items(self, split: str):
        if hasattr(self.source, "iter_split"):  # a streaming source (ParallelText): never a whole corpus in memory
            return self.source.iter_split(split)
        if self._splits is None:
            self._splits = self.source.splits()
        return self._splits[split]

    def _encoded_store(self, split: str, key: list) -> ExampleStore:
        records, plugin, tokenizer = self.records[split], self.plugin, self.tokenizer
        seen: dict[str, frozenset] = {}  # the training captions, where evaluation examples are marked unseen

        def rows():
            """The rows to encode, read only when the store must be prepared: the tokenizers are fitted first (on
            the training records, before the workers fork), so a cached start fits nothing."""
            if not self._fitted():
                if not tokenizer.is_fitted:
                    tokenizer.fit(ColumnTexts(self.records["train"], "references"))
                plugin.fit(self.records["train"])
            if self._marks_unseen(split):
                seen["train"] = caption_set(ColumnTexts(self.records["train"], "references"))
            yield from range(len(records))

        def prepare(rows: list[int], first: int) -> Shard:
            columns, skipped = plugin.encode(records, rows)
            targets = [[tokenizer.encode(text) for text in records.value("references", row)] for row in columns["row"]]
            columns["row"] = pa.array(columns["row"], type=pa.int64())
            columns["targets"] = pa.array([[i for ids in t for i in ids] for t in targets], type=pa.list_(pa.int32()))
            columns["target_lengths"] = pa.array([[len(ids) for ids in t] for t in targets], type=pa.list_(pa.int32()))
            if seen:
                columns["unseen"] = pa.array([is_unseen(records.value("references", row), seen["train"])
                                              for row in columns["row"].to_pylist()], type=pa.bool_())
            return Shard(columns, [tuple(skip) for skip in skipped])

        return prepared_store(
            self._encoded_folder(split, key), rows(), prepare, shard_size=self.shard_size or plugin.shard_size,
            workers=self.prepare_workers,
            meta=lambda: {"tokenizers": states_to_text(self.state_dict()), **plugin.settings()},
            describe=f"encoded {split} {plugin.unit}",
        )

    def _encoded_folder(self, split: str, key: list) -> Path:
        folder = self.records[split].folder
        if folder not in self._stamps:  # a stat of every record's file: once, however often it is asked
            self._stamps[folder] = self.plugin.file_stamps(self.records[split])
        marked = [self._marks_unseen(split)] if self.plugin.marks_unseen else []  # a store with or without them
        return self.store_folder("encoded", folder.name, key, self.plugin.settings(), self._stamps[folder], *marked)

    def _marks_unseen(self, split: str) -> bool:
        """Evaluation examples are marked unseen (a caption not among the training captions) only where the training
        split is this data module's own: testing a checkpoint on another data set (``only_splits("test")``) has not
        the model's training captions, so its ``*_unseen`` metrics are left out rather than measured against that
        data set's training split."""
        return self.plugin.marks_unseen and split != "train" and "train" in self.splits

    def _fitted(self) -> bool:  # every tokenizer, the target's and the plug-in's
        return all(t.is_fitted for t in self.tokenizers().values())

    def _store_trained_with_these_tokenizers(self, split: str, trained_key: list) -> ExampleStore | None:
        """The encoded store training prepared (keyed by the tokenizers' settings) when the tokenizers it fitted
        are these ones (from a checkpoint), so evaluation encodes nothing again; else None."""
        try:
            store = open_store(self._encoded_folder(split, trained_key))
        except DamagedStoreError:
            return None
        if store is None or states_from_text(store.meta["tokenizers"], f"the example store {store.folder}") \
                != self.state_dict():
            return None
        return store

    # skips and the length filter ---------------------------------------------------------------
    def _report_store_skips(self, split: str) -> None:
        """Count the source's bad items and unreadable files; a split with no readable record is always refused."""
        records, encoded = self.records[split], self.encoded[split]
        if records.skipped:
            self._count(split, "lines", records.skipped, records.items)
        if len(records) and not len(encoded):
            naming = BadSamples(self.bad_samples.on_error, 1.0)  # names the files, without stopping on the fraction
            for skip in encoded.skipped:
                naming.skip(split, "files", *skip)
            raise self.plugin.read_error(
                f"none of the {len(records)} {self.plugin.unit} of the {split} split could be read (see the warnings)")
        self._count(split, "files", encoded.skipped, len(records))

    def _count(self, split: str, stage: str, skipped: list, total: int) -> None:
        self.bad_samples.begin(split, stage)
        for skip in skipped:
            self.bad_samples.skip(split, stage, *skip)
        self.bad_samples.end(split, stage, total, self.plugin.unit if stage != "length" else self.plugin.example_unit)

    def _examples(self, split: str) -> np.ndarray:
        """(N, 2) [encoded row, reference index] of the split's examples: every reference of every training
        record that passes the length filter; the first reference of every evaluation record."""
        encoded = self.encoded[split]
        if split != "train":
            return np.stack([np.arange(len(encoded)), np.zeros(len(encoded), dtype=np.int64)], axis=1)
        examples, target_sizes = training_examples(encoded)
        source_sizes = encoded.column("source_size").astype(np.int64)[examples[:, 0]]
        problems = self._length_problems(source_sizes, target_sizes)
        skipped = [(self.plugin.describe(self.records[split], int(encoded.value("row", int(examples[i, 0])))),
                    *problems[i]) for i in np.flatnonzero([p is not None for p in problems])]
        self.dropped = len(skipped)
        self._count(split, "length", skipped, len(examples))
        return examples[[p is None for p in problems]]

    def _length_problems(self, source_sizes: np.ndarray, target_sizes: np.ndarray) -> list[tuple[str, str] | None]:
        """(reason, problem) of each training example the filter leaves out, None for those it keeps."""
        problems: list[tuple[str, str] | None] = [None] * len(target_sizes)
        checks = [("target", target_sizes, self.max_target_len)]
        if self.plugin.source_has_size:
            checks.insert(0, ("source", source_sizes, self.max_source_len))
        for side, sizes, limit in checks:
            empty = np.flatnonzero(sizes == 0)
            long = np.flatnonzero(sizes > limit) if limit is not None else []
            for i in empty:
                problems[i] = problems[i] or (f"empty {side}", f"the {side} is empty after tokenizing")
            for i in long:
                unit = self.plugin.source_unit if side == "source" else "tokens"
                problems[i] = problems[i] or (f"{side} over max_{side}_len", (
                    f"{sizes[i]} {side} {unit}, over data.max_{side}_len={limit} (raise it to keep such examples)"))
        return problems

    @property
    def skipped(self) -> dict[str, int]:
        """Skipped samples per split."""
        return self.bad_samples.skipped

    def skip_summary(self) -> dict[str, float]:
        """``{"data/skipped_train": n, "data/skip_fraction_train": f, ...}`` for the run's logger."""
        return self.bad_samples.summary()

    # loaders ---------------------------------------------------------------------------------
    def collate(self) -> Collate:
        return Collate(self.tokenizer, self.plugin)

    def _loader(self, split: str, train: bool) -> DataLoader:
        if split not in self.datasets:
            raise RuntimeError("call setup() before asking for a dataloader")
        dataset, options = self.datasets[split], self.loader
        common: dict[str, Any] = {"collate_fn": self.collate(), "num_workers": options.num_workers,
                                  "persistent_workers": options.num_workers > 0}
        if train and not options.bucket:
            return DataLoader(dataset, batch_size=options.batch_size, shuffle=True, **common)
        batch_size = options.batch_size if train else options.eval_batch_size or options.batch_size
        accumulation = getattr(self.trainer, "accumulate_grad_batches", 1) if train else 1
        sampler = BucketBatchSampler(dataset.lengths(), batch_size=batch_size,
                                     max_tokens=options.max_tokens if train else None, shuffle=train, seed=self.seed,
                                     accumulation=accumulation)
        return DataLoader(dataset, batch_sampler=sampler, **common)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", train=False)

    def example_batch(self, count: int, split: str = "val") -> dict[str, Any]:
        """The first ``count`` examples of a split as one batch: the same examples every time it is asked."""
        if split not in self.datasets:
            raise RuntimeError("call setup() before asking for examples")
        dataset = self.datasets[split]
        return self.collate()([dataset[i] for i in range(min(count, len(dataset)))])

    # what the model, the plots and prediction need ---------------------------------------------
    def tokenizers(self) -> dict[str, Tokenizer]:
        """The tokenizers by role; the model decodes with "target"."""
        return {**self.plugin.tokenizers(), "target": self.tokenizer}

    def encoder_kwargs(self) -> dict[str, int]:
        return self.plugin.encoder_kwargs()

    def use_frozen_features(self, extractor) -> None:
        """Batch a frozen encoder part's features instead of its input (images; see ``attend.data.images``)."""
        self.plugin.use_frozen_features(extractor, self)

    def readable_source(self, batch: dict[str, Any], index: int) -> Any:
        return self.plugin.readable_source(batch, index)

    def batch_from_sources(self, sources: list[str]) -> dict[str, Any]:
        """A batch of what predict.py was given (sentences, image or audio files); targets are empty."""
        examples = self.plugin.sources_to_examples(sources)
        for index, (example, source) in enumerate(zip(examples, sources, strict=True)):
            example.update(tgt=[], id=index, source=source, reference=[] if self.plugin.several_references else "")
        return self.collate()(examples)

    # checkpoint ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The fitted tokenizers; Lightning stores this in every checkpoint."""
        if not self._fitted():
            return {}
        return {**self.plugin.state_dict(), "tgt_tokenizer": self.tokenizer.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Use saved tokenizers; data encoded with other ones is encoded again (other stores)."""
        if not state_dict or state_dict == self.state_dict():
            return
        self.load_tokenizers(state_dict)
        if self.encoded:
            self.records, self.encoded, self.datasets = {}, {}, {}
            self.setup()

    def load_tokenizers(self, state_dict: dict[str, Any]) -> None:
        self.tokenizer = tokenizer_from_state(state_dict["tgt_tokenizer"])
        self.plugin.load_state_dict(state_dict)

