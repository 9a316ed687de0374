"""What the translation, caption and speech data modules share: the source and its bad-sample policy, example
stores, bucketed loaders, a fixed batch of examples to show, and tokenizers saved in checkpoints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader, Dataset

from attend.data.bad_samples import BadSamples, ReportsSkips
from attend.data.bucketing import BucketBatchSampler
from attend.data.store import file_stamp, store_folder
from attend.data.tokenizers.tokenizer import Tokenizer, tokenizer_from_state


def source_settings(source) -> Any:
    """What a source's examples depend on, for store keys: its ``settings()`` when it has one, with the size and
    modification time of every setting that names a file (a manifest, a caption JSON, a font), so a file whose
    content changed gives new stores."""
    settings = getattr(source, "settings", dict)()
    files = {key: file_stamp(value) for key, value in sorted(settings.items()) if _names_file(value)}
    return {**settings, "file stamps": files} if files else settings


def _names_file(value: Any) -> bool:
    """Whether a setting is the path of an existing file."""
    return isinstance(value, (str, os.PathLike)) and bool(str(value)) and os.path.isfile(value)


def default_prepare_workers() -> int:
    """Processes that prepare data (``data.prepare_workers``, null: this): the CPU cores, at most 8."""
    return min(len(os.sched_getaffinity(0)), 8)


class StoreDataModule(ReportsSkips, L.LightningDataModule):
    """A data module whose prepared examples live in example stores (``attend.data.store``).

    Subclasses fill ``self.datasets`` (split -> a Dataset with ``lengths()``) in ``setup`` and write
    ``_collate()``. Training batches hold examples of similar length: at most ``batch_size`` of them and, with
    ``max_tokens``, at most that many padded length units (tokens, or feature frames for speech); validation and
    test batches hold ``eval_batch_size`` examples, sorted by length (``max_tokens`` does not apply: nothing is
    learned from them, and the same batches on every machine keep evaluation comparable). ``bucket=False``
    draws training batches at random instead. Bad samples follow ``on_error`` (skip | raise) and
    ``max_skip_fraction`` (see ``BadSamples``); ``skipped`` and ``skip_summary()`` give the counts.
    Stores are prepared by ``prepare_workers`` processes (None: the CPU cores, at most 8).
    """

    def __init__(
        self,
        source,
        batch_size: int,
        eval_batch_size: int | None,
        num_workers: int,
        seed: int,
        cache_dir: str | os.PathLike | None,
        max_tokens: int | None = None,
        on_error: str = "skip",
        max_skip_fraction: float = 0.1,
        prepare_workers: int | None = None,
        bucket: bool = True,
    ) -> None:
        super().__init__()
        self.bad_samples = BadSamples(on_error, max_skip_fraction)
        self.source = source
        self.share_policy(source)
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.num_workers = num_workers
        self.seed = seed
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.max_tokens = max_tokens
        self.prepare_workers = default_prepare_workers() if prepare_workers is None else prepare_workers
        self.bucket = bucket
        self.datasets: dict[str, Dataset] = {}

    def store_folder(self, kind: str, *key_parts: Any) -> Path:
        """Where the example store of ``kind`` for these settings lives (``attend.data.store``): keyed by the
        source's class and ``settings()`` and ``key_parts``; a temporary folder without ``cache_dir``."""
        return store_folder(self.cache_dir, kind, type(self.source).__name__, source_settings(self.source), *key_parts)

    @property
    def prepared(self) -> bool:
        """Whether setup has run in this process: train.py sets up before fit, which prepares again."""
        return bool(self.datasets)

    def _collate(self):
        raise NotImplementedError

    # loaders ---------------------------------------------------------------------------------
    def _loader(self, split: str, train: bool) -> DataLoader:
        if split not in self.datasets:
            raise RuntimeError("call setup() before asking for a dataloader")
        dataset = self.datasets[split]
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
        return self._collate()([dataset[i] for i in range(min(count, len(dataset)))])


class TargetTextDataModule(StoreDataModule):
    """A data module whose only text is the target (captions, transcripts) and whose source is read as is.

    Subclasses fill ``self.loaded`` (split -> what ``_encode_splits`` tokenizes) and ``self.datasets``, and write
    ``_collate()`` and ``_encode_splits()``.
    """

    def __init__(
        self,
        source,
        tokenizer: Tokenizer,
        batch_size: int,
        eval_batch_size: int | None,
        num_workers: int,
        seed: int,
        cache_dir: str | os.PathLike | None,
        max_tokens: int | None = None,
        on_error: str = "skip",
        max_skip_fraction: float = 0.1,
        prepare_workers: int | None = None,
    ) -> None:
        super().__init__(
            source, batch_size, eval_batch_size, num_workers, seed, cache_dir, max_tokens=max_tokens,
            on_error=on_error, max_skip_fraction=max_skip_fraction, prepare_workers=prepare_workers,
        )
        self.tokenizer = tokenizer
        self.loaded: dict[str, tuple] = {}
        self._splits: dict[str, list] | None = None

    def source_splits(self) -> dict[str, list]:
        """The source's splits, read once per process (prepare_data and setup both need them)."""
        if self._splits is None:
            self._splits = self.source.splits()
        return self._splits

    def _encode_splits(self) -> None:
        raise NotImplementedError

    def tokenizers(self) -> dict[str, Tokenizer]:
        return {"target": self.tokenizer}

    # checkpoint ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The fitted tokenizer; Lightning stores this in every checkpoint."""
        return {"tgt_tokenizer": self.tokenizer.state_dict()} if self.tokenizer.is_fitted else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Use a saved tokenizer; targets already tokenized with another one are tokenized again."""
        if not state_dict or state_dict == self.state_dict():
            return
        self.tokenizer = tokenizer_from_state(state_dict["tgt_tokenizer"])
        if self.loaded:
            self._encode_splits()
