"""The LightningDataModule for text-to-text tasks (translation, date normalisation)."""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

import lightning as L
from torch.utils.data import DataLoader

from attend.data.bad_samples import BadSamples, ReportsSkips
from attend.data.bucketing import BucketBatchSampler
from attend.data.splitting import Pair
from attend.data.text.dataset import TranslationCollate, TranslationDataset
from attend.data.tokenizers.tokenizer import Tokenizer, tokenizer_from_state

log = logging.getLogger("attend.data")


class PairSource(Protocol):
    """Anything with ``splits()`` -> {"train", "val", "test"} -> (source, target) pairs.

    A source that knows which source characters produce each target character (``DatePairs``)
    also has ``alignments(split)``: one list of [start, end) spans (or None) per pair.
    """

    def splits(self) -> dict[str, list[Pair]]: ...


class TranslationDataModule(ReportsSkips, L.LightningDataModule):
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
    ``max_tokens`` caps padded tokens per train batch.
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
    ) -> None:
        super().__init__()
        self.bad_samples = BadSamples(on_error, max_skip_fraction)
        self.source = source
        self.share_policy(source)
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.max_tokens = max_tokens
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len
        self.num_workers = num_workers
        self.bucket = bucket
        self.seed = seed
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.splits: dict[str, list[Pair]] | None = None
        self.alignments: dict[str, list] = {}  # val/test reference-to-source spans, when the source knows them
        self.train_dataset: TranslationDataset | None = None
        self.val_dataset: TranslationDataset | None = None
        self.test_dataset: TranslationDataset | None = None
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
        """Build the source's cache and train cached tokenizers once (local rank 0)."""
        self._fit_tokenizers(self._read_splits()["train"])

    def setup(self, stage: str | None = None) -> None:
        """Read splits, fit unfitted tokenizers on train, tokenize every split once (idempotent)."""
        if self.train_dataset is not None:
            return
        self._read_splits()
        self.alignments = self._source_alignments()
        self._fit_tokenizers(self.splits["train"])
        self._encode_splits()

    def _read_splits(self) -> dict[str, list[Pair]]:
        """The source's splits, read once: train.py and Lightning both call prepare_data and setup."""
        if self.splits is None:
            self.splits = self.source.splits()
        return self.splits

    def _source_alignments(self) -> dict[str, list]:
        """Val/test alignments for attention metrics (AlignmentError), from sources that have ``alignments``."""
        if not hasattr(self.source, "alignments"):
            return {}
        return {split: self.source.alignments(split) for split in ("val", "test")}

    def _fit_tokenizers(self, train: list[Pair]) -> None:
        for tokenizer, side in ((self.src_tokenizer, 0), (self.tgt_tokenizer, 1)):
            if tokenizer.is_fitted:
                continue
            if self.cache_dir is not None and getattr(tokenizer, "cache_dir", "") is None:
                tokenizer.cache_dir = self.cache_dir
            tokenizer.fit([pair[side] for pair in train])

    def _encode_splits(self) -> None:
        assert self.splits is not None
        self.train_dataset = self._encode(self.splits["train"], filter_long=True)
        self.val_dataset = self._encode(self.splits["val"], filter_long=False, alignments=self.alignments.get("val"))
        self.test_dataset = self._encode(self.splits["test"], filter_long=False, alignments=self.alignments.get("test"))
        log.info(
            "pairs: train %d, val %d, test %d; vocab: source %d, target %d",
            len(self.train_dataset),
            len(self.val_dataset),
            len(self.test_dataset),
            self.src_tokenizer.vocab_size,
            self.tgt_tokenizer.vocab_size,
        )
        self.bad_samples.log_summary()

    def _encode(self, pairs: list[Pair], filter_long: bool, alignments: list | None = None) -> TranslationDataset:
        src = [self.src_tokenizer.encode(s) for s, _ in pairs]
        tgt = [self.tgt_tokenizer.encode(t) for _, t in pairs]
        keep = self._drop_bad_pairs(pairs, src, tgt) if filter_long else range(len(pairs))
        return TranslationDataset(
            src=[src[i] for i in keep],
            tgt=[tgt[i] for i in keep],
            sources=[pairs[i][0] for i in keep],
            references=[pairs[i][1] for i in keep],
            ids=list(keep),
            alignments=None if alignments is None else [alignments[i] for i in keep],
        )

    def _drop_bad_pairs(self, pairs: list[Pair], src: list[list[int]], tgt: list[list[int]]) -> list[int]:
        """Indices of the training pairs to keep; an empty side or one over its length limit is a bad sample."""
        self.bad_samples.begin("train", "length")
        keep = []
        for i, (source, target) in enumerate(pairs):
            problem = self._length_problem(len(src[i]), len(tgt[i]))
            if problem is None:
                keep.append(i)
            else:
                reason = "empty after tokenizing" if problem.startswith("empty") else "over the length limit"
                key = f"pair {i} ({source[:40]!r} -> {target[:40]!r})"
                self.bad_samples.skip("train", "length", key, reason, problem)
        self.dropped = len(pairs) - len(keep)
        log.info(
            "dropped %d of %d training pairs (empty, or longer than %d source / %d target tokens)",
            self.dropped,
            len(pairs),
            self.max_source_len,
            self.max_target_len,
        )
        self.bad_samples.end("train", "length", len(pairs), "pairs")
        return keep

    def _length_problem(self, source_tokens: int, target_tokens: int) -> str | None:
        """Why a training pair of these token counts is dropped, or None to keep it."""
        if source_tokens == 0 or target_tokens == 0:
            return f"empty {'source' if source_tokens == 0 else 'target'} after tokenizing"
        for side, tokens, limit in (("source", source_tokens, self.max_source_len),
                                    ("target", target_tokens, self.max_target_len)):
            if tokens > limit:
                return f"{tokens} {side} tokens, over data.max_{side}_len={limit} (raise it to keep such pairs)"
        return None

    # loaders ---------------------------------------------------------------------------------
    def _loader(self, dataset: TranslationDataset | None, train: bool) -> DataLoader:
        if dataset is None:
            raise RuntimeError("call setup() before asking for a dataloader")
        common: dict[str, Any] = {
            "collate_fn": self._collate(),
            "num_workers": self.num_workers,
            "persistent_workers": self.num_workers > 0,
        }
        if train and not self.bucket:
            return DataLoader(dataset, batch_size=self.batch_size, shuffle=True, **common)
        batch_sampler = BucketBatchSampler(
            dataset.lengths(),
            batch_size=self.batch_size if train else self.eval_batch_size,
            max_tokens=self.max_tokens if train else None,
            shuffle=train,
            seed=self.seed,
        )
        return DataLoader(dataset, batch_sampler=batch_sampler, **common)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_dataset, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_dataset, train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_dataset, train=False)

    # what the model, plots and prediction need ---------------------------------------------
    def tokenizers(self) -> dict[str, Tokenizer]:
        """The fitted tokenizers by role; the model decodes with "target"."""
        return {"source": self.src_tokenizer, "target": self.tgt_tokenizer}

    def encoder_kwargs(self) -> dict[str, int]:
        """What a text encoder needs from the data."""
        return {"vocab_size": self.src_tokenizer.vocab_size, "pad_id": self.src_tokenizer.pad_id}

    def _collate(self) -> TranslationCollate:
        tgt = self.tgt_tokenizer
        return TranslationCollate(self.src_tokenizer.pad_id, tgt.bos_id, tgt.eos_id)

    def example_batch(self, count: int, split: str = "val") -> dict[str, Any]:
        """The first ``count`` examples of a split as one batch (fixed examples for plots)."""
        dataset = {"val": self.val_dataset, "test": self.test_dataset, "train": self.train_dataset}[split]
        if dataset is None:
            raise RuntimeError("call setup() before asking for examples")
        return self._collate()([dataset[i] for i in range(min(count, len(dataset)))])

    def plot_source(self, batch: dict[str, Any], index: int) -> list[str]:
        """What an attention plot shows of one batch row's source: its readable tokens (axis labels)."""
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
        """Use saved tokenizers; data already tokenized with other ones is tokenized again."""
        if not state_dict:
            return
        if state_dict == self.state_dict():
            return
        self.src_tokenizer = tokenizer_from_state(state_dict["src_tokenizer"])
        self.tgt_tokenizer = tokenizer_from_state(state_dict["tgt_tokenizer"])
        if self.splits is not None:
            self._encode_splits()
