"""The LightningDataModule for text-to-text tasks (translation, date normalisation)."""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from attend.data.base import StoreDataModule
from attend.data.cache import replay_skips
from attend.data.splitting import SPLITS, Pair
from attend.data.store import DamagedStoreError, ExampleStore, Shard, open_store, prepared_store
from attend.data.text.dataset import TranslationCollate, TranslationDataset, pair_columns
from attend.data.tokenizers.tokenizer import Tokenizer, states_from_text, states_to_text, tokenizer_from_state

log = logging.getLogger("attend.data")


class PairSource(Protocol):
    """Anything with ``splits()`` -> {"train", "val", "test"} -> (source, target) pairs.

    A source that knows which source characters produce each target character (``DatePairs``)
    also has ``alignments(split)``: one list of [start, end) spans (or None) per pair.
    """

    def splits(self) -> dict[str, list[Pair]]: ...


class TranslationDataModule(StoreDataModule):
    """Pairs from ``source``, tokenized once; bucketed train batches, length-sorted val/test.

    ``src_tokenizer``/``tgt_tokenizer`` are tokenizer objects (Hydra instantiates them); unfitted
    ones are fitted on the training split in ``setup``. ``tokenizer_states`` ({"src_tokenizer":
    state, "tgt_tokenizer": state}, as ``state_dict()`` returns and Lightning saves in every
    checkpoint under ``"TranslationDataModule"``) replaces them with the saved, fitted ones, so
    evaluation reuses the training vocabulary. ``cache_dir`` is given to tokenizers that cache
    (SentencePiece) and have no folder of their own.

    Only training pairs longer than ``max_source_len``/``max_target_len`` tokens (target without
    bos/eos) or with an empty side are dropped; val/test keep every pair, since they are scored on
    raw text. Dropped pairs, and lines a source cannot use, are bad samples: skipped and counted, or
    an error, by ``on_error`` (skip | raise) and ``max_skip_fraction`` (``skipped``, ``skip_summary()``).
    ``max_tokens`` caps padded tokens per train batch. Tokenized pairs live in one example store per split
    (``attend.data.store``), prepared once by ``prepare_workers`` processes in shards of ``shard_size`` pairs.
    Batches: ``src`` (B, S), ``src_lengths`` (B,), ``tgt`` (B, T) = bos + ids + eos,
    ``tgt_lengths`` (B,) (bos/eos included), ``ids`` (B,) positions in the split as read,
    ``sources`` and ``references`` (raw text); val/test batches of a source with ``alignments``
    also carry ``alignments`` (for each reference character, its source characters' span or None).
    """

    modality = "text"  # what it feeds the encoder; the config check matches it with the encoder's

    def __init__(
        self,
        source: PairSource,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        batch_size: int = 64,
        max_tokens: int | None = None,
        max_source_len: int = 100,
        max_target_len: int = 100,
        num_workers: int = 0,
        bucket: bool = True,
        seed: int = 1234,
        cache_dir: str | os.PathLike | None = None,
        eval_batch_size: int | None = None,
        tokenizer_states: dict[str, dict[str, Any]] | None = None,
        on_error: str = "skip",
        max_skip_fraction: float = 0.1,
        prepare_workers: int | None = None,
        shard_size: int = 20000,
    ) -> None:
        super().__init__(
            source, batch_size, eval_batch_size, num_workers, seed, cache_dir, max_tokens=max_tokens,
            on_error=on_error, max_skip_fraction=max_skip_fraction, prepare_workers=prepare_workers, bucket=bucket,
        )
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len
        self.shard_size = shard_size
        self.splits: dict[str, list[Pair]] | None = None  # the source's pairs, when a store had to be prepared
        self.stores: dict[str, ExampleStore] = {}
        self.source_read: set[str] = set()  # splits this process read from the source (and reported the skips of)
        self.dropped = 0  # training pairs dropped by the length filter
        if tokenizer_states is not None:
            self.load_state_dict(tokenizer_states)

    @classmethod
    def from_tokenizers(
        cls, source: PairSource, tokenizer_states: dict[str, Any], **kwargs: Any
    ) -> TranslationDataModule:
        """A datamodule whose tokenizers are rebuilt from saved states (no fitting)."""
        src = tokenizer_from_state(tokenizer_states["src_tokenizer"])
        tgt = tokenizer_from_state(tokenizer_states["tgt_tokenizer"])
        return cls(source, src, tgt, **kwargs)

    # data ------------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Prepare the example store of every split once (local rank 0; other processes wait and reuse it)."""
        self._open_stores()

    def setup(self, stage: str | None = None) -> None:
        """Open (preparing first, if needed) every split's store; tokenizers fitted on train come with it."""
        if self.datasets:
            return
        self._open_stores()
        self.datasets = {split: TranslationDataset(self.stores[split]) for split in SPLITS}
        self._report_skips()
        log.info(
            "pairs: train %d, val %d, test %d; vocab: source %d, target %d",
            len(self.train_dataset),
            len(self.val_dataset),
            len(self.test_dataset),
            self.src_tokenizer.vocab_size,
            self.tgt_tokenizer.vocab_size,
        )
        self.bad_samples.log_summary()

    def _open_stores(self) -> None:
        """``self.stores``: split -> ExampleStore, keyed by the source, the tokenizers and the length limits.

        A finished store is opened without reading the source; otherwise the source is read, unfitted
        tokenizers are fitted on its training split, and the pairs are tokenized in ``prepare_workers``
        processes. The fitted tokenizers are kept in the stores, so a later start takes them from there.
        """
        if self.stores:
            return
        source_key = text_source_key(self.source)
        key = (source_key, self._tokenizer_key(), self.max_source_len, self.max_target_len)
        trained_key = (source_key, self._tokenizer_key(settings_only=True), self.max_source_len, self.max_target_len)
        for split in SPLITS:
            if trained_key != key and (store := self._store_trained_with_these_tokenizers(split, trained_key)):
                self.stores[split] = store  # evaluating a checkpoint: the stores its training prepared
                continue
            store = prepared_store(
                self.store_folder("text", split, *key),
                self._pair_rows(split),
                self._tokenize_chunk(split),
                shard_size=self.shard_size,
                workers=self.prepare_workers,
                meta=lambda split=split: {"tokenizers": states_to_text(self.state_dict()), **self._source_skips(split)},
                describe=f"{split} pairs",
            )
            self.stores[split] = store
            if not (self.src_tokenizer.is_fitted and self.tgt_tokenizer.is_fitted):
                self._use_tokenizers(states_from_text(store.meta["tokenizers"]))

    def _tokenizer_key(self, settings_only: bool = False) -> list[Any]:
        """What the token ids depend on: a fitted tokenizer's whole state, else (or with ``settings_only``) its
        class and settings, from which training fits it."""
        return [
            hashlib.sha1(pickle.dumps(t.state_dict())).hexdigest() if t.is_fitted and not settings_only
            else [type(t).__name__, t.settings()]
            for t in (self.src_tokenizer, self.tgt_tokenizer)
        ]

    def _store_trained_with_these_tokenizers(self, split: str, trained_key: tuple) -> ExampleStore | None:
        """The finished store that training prepared (keyed by the tokenizers' settings) when the tokenizers it
        fitted are these ones (from a checkpoint), so evaluation tokenizes nothing again; else None."""
        try:
            store = open_store(self.store_folder("text", split, *trained_key))
        except DamagedStoreError:
            return None
        if store is None or states_from_text(store.meta["tokenizers"]) != self.state_dict():
            return None
        return store

    def _pair_rows(self, split: str) -> Iterator[tuple[int, str, str, Any]]:
        """(position, source, target, alignment) of a split's pairs, read (and the tokenizers fitted) only when
        a store is prepared. A source with ``iter_split`` (ParallelText) is streamed, a line at a time, so a
        corpus of millions of pairs never sits in memory; the others give their splits as lists."""
        if hasattr(self.source, "iter_split"):
            self._fit_tokenizers(TrainingSide(self, 0), TrainingSide(self, 1))
            pairs: Iterable[Pair] = self.source.iter_split(split)
            self.source_read.add(split)
        else:
            splits = self._read_splits()
            self._fit_tokenizers(*([pair[side] for pair in splits["train"]] for side in (0, 1)))
            pairs = splits[split]
        alignments = self.source.alignments(split) if hasattr(self.source, "alignments") and split != "train" else None
        for index, (source, target) in enumerate(pairs):
            yield index, source, target, None if alignments is None else alignments[index]

    def _read_splits(self) -> dict[str, list[Pair]]:
        """The source's splits, read once: train.py and Lightning both call prepare_data and setup."""
        if self.splits is None:
            self.splits = self.source.splits()
            self.source_read.update(SPLITS)
        return self.splits

    def _fit_tokenizers(self, source_texts: Iterable[str], target_texts: Iterable[str]) -> None:
        for tokenizer, texts in ((self.src_tokenizer, source_texts), (self.tgt_tokenizer, target_texts)):
            if tokenizer.is_fitted:
                continue
            if self.cache_dir is not None and getattr(tokenizer, "cache_dir", "") is None:
                tokenizer.cache_dir = self.cache_dir
            tokenizer.fit(texts)

    def _tokenize_chunk(self, split: str):
        """What a preparation worker does with a chunk of pair rows: tokenize, and on train drop bad pairs."""
        with_alignments = split != "train" and hasattr(self.source, "alignments")

        def tokenize(rows: list[tuple[int, str, str, Any]], first: int) -> Shard:
            kept, skipped = [], []
            for index, source, target, alignment in rows:
                src, tgt = self.src_tokenizer.encode(source), self.tgt_tokenizer.encode(target)
                problem = self._length_problem(len(src), len(tgt)) if split == "train" else None
                if problem is None:
                    kept.append((index, src, tgt, source, target, alignment))
                else:
                    reason = "empty after tokenizing" if problem.startswith("empty") else "over the length limit"
                    skipped.append((f"pair {index} ({source[:40]!r} -> {target[:40]!r})", reason, problem))
            return Shard(pair_columns(kept, with_alignments), skipped)

        return tokenize

    def _source_skips(self, split: str) -> dict[str, Any]:
        """What reading the source skipped in ``split`` (bad lines), kept in its store to report on later starts."""
        policy = self.bad_samples
        return {
            "source_skips": [[s.stage, s.key, s.reason, s.problem] for s in policy.skips
                             if s.split == split and s.stage != "length"],
            "source_totals": {stage: list(total) for (name, stage), total in policy.totals.items()
                              if name == split and stage != "length"},
        }

    def _report_skips(self) -> None:
        """Tell the bad-sample policy what was skipped: bad source lines (when the source was not read in this
        process: the stores remember them) and training pairs the store left out (every start)."""
        for split, store in self.stores.items():
            if split not in self.source_read:
                self._replay_source_skips(split, store)
        train = self.stores["train"]
        replay_skips(self.bad_samples, "train", train.skipped, train.items, "pair", stage="length")
        self.dropped = len(train.skipped)
        log.info(
            "dropped %d of %d training pairs (empty, or longer than %d source / %d target tokens)",
            self.dropped,
            train.items,
            self.max_source_len,
            self.max_target_len,
        )

    def _replay_source_skips(self, split: str, store: ExampleStore) -> None:
        recorded = store.meta.get("source_totals", {})
        for stage in recorded:
            self.bad_samples.begin(split, stage)
        for stage, key, reason, problem in store.meta.get("source_skips", []):
            self.bad_samples.skip(split, stage, key, reason, problem)
        for stage, (total, unit) in recorded.items():
            self.bad_samples.end(split, stage, total, unit)

    def _length_problem(self, source_tokens: int, target_tokens: int) -> str | None:
        """Why a training pair of these token counts is dropped, or None to keep it."""
        if source_tokens == 0 or target_tokens == 0:
            return f"empty {'source' if source_tokens == 0 else 'target'} after tokenizing"
        for side, tokens, limit in (("source", source_tokens, self.max_source_len),
                                    ("target", target_tokens, self.max_target_len)):
            if tokens > limit:
                return f"{tokens} {side} tokens, over data.max_{side}_len={limit} (raise it to keep such pairs)"
        return None

    # datasets by name (the base class keeps them by split) ----------------------------------
    @property
    def train_dataset(self) -> TranslationDataset | None:
        return self.datasets.get("train")

    @property
    def val_dataset(self) -> TranslationDataset | None:
        return self.datasets.get("val")

    @property
    def test_dataset(self) -> TranslationDataset | None:
        return self.datasets.get("test")

    # what the model, the run's examples and prediction need -----------------------------------
    def tokenizers(self) -> dict[str, Tokenizer]:
        """The fitted tokenizers by role; the model decodes with "target"."""
        return {"source": self.src_tokenizer, "target": self.tgt_tokenizer}

    def encoder_kwargs(self) -> dict[str, int]:
        """What a text encoder needs from the data."""
        return {"vocab_size": self.src_tokenizer.vocab_size, "pad_id": self.src_tokenizer.pad_id}

    def _collate(self) -> TranslationCollate:
        tgt = self.tgt_tokenizer
        return TranslationCollate(self.src_tokenizer.pad_id, tgt.bos_id, tgt.eos_id)

    def readable_source(self, batch: dict[str, Any], index: int) -> list[str]:
        """The source of one batch row as a person reads it: one readable piece per source position."""
        length = int(batch["src_lengths"][index])
        return self.src_tokenizer.tokens(batch["src"][index, :length].tolist())

    def batch_from_sources(self, sources: list[str]) -> dict[str, Any]:
        """A batch of raw source sentences (prediction); targets are empty."""
        examples = [
            {"src": self.src_tokenizer.encode(text) or [self.src_tokenizer.unk_id], "tgt": [], "id": i,
             "source": text, "reference": ""}
            for i, text in enumerate(sources)
        ]
        return self._collate()(examples)

    # checkpoint ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The fitted tokenizers; Lightning stores this in every checkpoint."""
        if not (self.src_tokenizer.is_fitted and self.tgt_tokenizer.is_fitted):
            return {}
        return {
            "src_tokenizer": self.src_tokenizer.state_dict(),
            "tgt_tokenizer": self.tgt_tokenizer.state_dict(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Use saved tokenizers; data already tokenized with other ones is tokenized again (other stores)."""
        if not state_dict or state_dict == self.state_dict():
            return
        self._use_tokenizers(state_dict)
        if self.stores:
            self.stores, self.datasets = {}, {}
            self.setup()

    def _use_tokenizers(self, state_dict: dict[str, Any]) -> None:
        self.src_tokenizer = tokenizer_from_state(state_dict["src_tokenizer"])
        self.tgt_tokenizer = tokenizer_from_state(state_dict["tgt_tokenizer"])


class TrainingSide:
    """One side of the training pairs of a streaming source, re-read on every iteration (a tokenizer may read
    its texts twice: SentencePiece hashes them, then trains); bad lines are skipped quietly here, since the
    pass that fills the store reports them."""

    def __init__(self, datamodule: TranslationDataModule, side: int) -> None:
        self.source = datamodule.source
        self.quiet = datamodule.bad_samples.cache_pass()
        self.side = side

    def __iter__(self) -> Iterator[str]:
        policy, self.source.bad_samples = self.source.bad_samples, self.quiet
        try:
            for pair in self.source.iter_split("train"):
                yield pair[self.side]
        finally:
            self.source.bad_samples = policy


def text_source_key(source: PairSource) -> Any:
    """What a text source's pairs depend on beyond its ``settings()``, which every store key holds already: for
    a source without them, a hash of its pairs (read at every start: give a large source ``settings()``)."""
    if hasattr(source, "settings"):
        return None
    return hashlib.sha1(pickle.dumps(source.splits())).hexdigest()
