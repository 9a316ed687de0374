"""The LightningDataModule for image captioning: images -> Memory over grid cells, captions -> words."""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
from typing import Any

import numpy as np
import pyarrow as pa

from attend.data.bad_samples import BadSamples
from attend.data.base import TargetTextDataModule
from attend.data.images import ImageCaption, read_rgb
from attend.data.images.dataset import CaptionCollate, CaptionDataset
from attend.data.images.features import FeatureExtractor, feature_store
from attend.data.images.pixels import (
    denormalize,
    image_key,
    image_store,
    image_transform,
    square_resize,
    to_uint8_tensor,
)
from attend.data.store import ExampleStore, Shard, prepared_store
from attend.data.tokenizers.tokenizer import Tokenizer, states_from_text, states_to_text, tokenizer_from_state
from attend.data.unseen import caption_set, is_unseen

log = logging.getLogger("attend.data")


class CaptionDataModule(TargetTextDataModule):
    """Records from ``source`` (``splits()`` and ``load_image(record)``), images kept as uint8 ``image_size``
    squares in the example store (``image_store``: prepared once by ``prepare_workers`` processes, memory-mapped
    by every loader worker), captions tokenized by ``tokenizer`` (fitted on training captions).

    Training has one example per (image, caption) pair, so an image with five captions is seen
    five times an epoch with a different target each time; validation and test have one example
    per image, scored against all its captions (``references``), with its first caption as the
    target of the loss. Training captions that are empty or longer than ``max_target_len`` words, and
    unreadable images, are bad samples: skipped and counted (``on_error``, ``max_skip_fraction``).
    Batches: ``src`` (B, 3, H, W), ``tgt`` (B, T), ``tgt_lengths``, ``ids``, ``sources`` (image
    keys), ``references`` (lists of captions), ``objects`` (data=shapes' boxes); validation and test
    batches also hold ``unseen`` (B,) bool (no reference occurs, normalised as the caption metrics
    compare them, among the training captions) and, for sources with ``load_mask`` (Tux Paint's
    alpha), ``object_masks`` (B, H, W) float in [0, 1] letterboxed like the pixels with
    ``has_object_mask`` (B,) bool.

    ``precompute_features``: when the encoder has a frozen part (the builder hands it over with
    ``use_frozen_features``), its features are computed once per image into a feature store and batches carry
    them as ``src`` (``attend.data.images.features``); training then sees ``feature_crops`` fixed random crops
    of each image besides the image itself instead of a new crop every step (0: the image only).
    """

    modality = "image"

    def __init__(
        self,
        source,
        tokenizer: Tokenizer,
        image_size: int = 64,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        augment: bool = True,
        hflip: bool = False,
        max_target_len: int = 50,
        num_workers: int = 0,
        seed: int = 1234,
        cache_dir: str | os.PathLike | None = None,
        on_error: str = "skip",
        max_skip_fraction: float = 0.1,
        prepare_workers: int | None = None,
        precompute_features: bool = True,
        feature_crops: int = 0,
    ) -> None:
        if feature_crops < 0:
            raise ValueError(f"data.feature_crops must be 0 or more, got {feature_crops}")
        super().__init__(
            source, tokenizer, batch_size, eval_batch_size, num_workers, seed, cache_dir,
            on_error=on_error, max_skip_fraction=max_skip_fraction, prepare_workers=prepare_workers,
        )
        self.image_size = image_size
        self.augment = augment
        self.hflip = hflip
        self.max_target_len = max_target_len
        # self.loaded: split -> (its image store, records whose image could be read: one per store row)
        self.dropped = 0  # training captions dropped by the length filter
        self.caption_stores: dict[str, ExampleStore] = {}  # split -> tokenized captions (``_open_caption_stores``)
        self._caption_key: list | None = None
        self.precompute_features = precompute_features
        self.feature_crops = feature_crops
        self.extractor: FeatureExtractor | None = None  # the encoder's frozen part (use_frozen_features)

    # data ------------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Prepare every split's image store once (local rank 0, or the first of several jobs); ``setup`` opens
        them. Without ``cache_dir`` the stores are this process's temporary ones, which setup opens as well."""
        if self.prepared:
            return
        silent = self.bad_samples.cache_pass()  # setup opens the stores and reports their skips
        for name, records in self.source_splits().items():
            self._store(name, records, silent)

    def setup(self, stage: str | None = None) -> None:
        """Read splits and open their image stores, fit the tokenizer on training captions, tokenize (idempotent)."""
        if self.datasets:
            return
        self.loaded = {name: self._load(name, records) for name, records in self.source_splits().items()}
        self._encode_splits()
        log.info(
            "images: train %d (%d captions), val %d, test %d; vocabulary %d words",
            len(self.loaded["train"][1]), len(self.datasets["train"]), len(self.datasets["val"]),
            len(self.datasets["test"]), self.tokenizer.vocab_size,
        )
        self.bad_samples.log_summary()

    def _encode_splits(self) -> None:
        self._open_caption_stores()
        for name, (images, records) in self.loaded.items():
            dataset = self._encode(images, records, self.caption_stores[name], train=name == "train")
            self.datasets[name] = dataset.with_features(self._features(name, images))

    def use_frozen_features(self, extractor: FeatureExtractor) -> None:
        """Batch ``extractor``'s features of the images instead of pixels (with ``precompute_features``): computed
        once into feature stores, now for splits already set up, in ``setup`` for the others."""
        if not self.precompute_features:
            return
        self.extractor = extractor
        for name, dataset in self.datasets.items():
            dataset.with_features(self._features(name, dataset.store))

    def _features(self, split: str, images: ExampleStore) -> ExampleStore | None:
        """The split's feature store (None without an extractor): training with its crops, the rest without."""
        if self.extractor is None:
            return None
        crops = self.feature_crops if split == "train" else 0
        folder = self.store_folder("image_features", images.folder.name, self.extractor.key, crops, self.seed)
        log.info("image features of the %s split: %s", split, self.extractor.key)
        return feature_store(images, self.extractor, crops, self.seed, folder, f"{split} image features")

    def _open_caption_stores(self) -> None:
        """``caption_stores``: split -> one row per record (as ``loaded``) with the ids of each of its captions and,
        for val/test, whether it is unseen; keyed by the split's image store and the tokenizer, whose fitted
        state travels in the store. A second start neither fits the tokenizer nor tokenizes (250k captions
        take seconds), and reads no caption it does not batch."""
        key = [type(self.tokenizer).__name__, self.tokenizer.settings()]
        if self.tokenizer.is_fitted:
            key.append(hashlib.sha1(pickle.dumps(self.tokenizer.state_dict())).hexdigest())
        if self.caption_stores and self._caption_key == key:
            return
        self._caption_key, self.caption_stores = key, {}
        train_records = self.loaded["train"][1]
        trained_on = captions_hash(train_records)  # the tokenizer and the unseen flags depend on them
        for name, (images, records) in self.loaded.items():
            store = prepared_store(
                self.store_folder("captions", images.folder.name, captions_hash(records), trained_on, key),
                self._caption_items(records, train_records, unseen=name != "train"),
                tokenize_captions(self.tokenizer),
                shard_size=50_000,
                meta=lambda: {"tokenizer": states_to_text(self.tokenizer.state_dict())},
                describe=f"{name} caption sets",
            )
            if not self.tokenizer.is_fitted:
                self.tokenizer = tokenizer_from_state(states_from_text(store.meta["tokenizer"]))
            self.caption_stores[name] = store

    def _caption_items(self, records: list[ImageCaption], train_records: list[ImageCaption], unseen: bool):
        """(captions, unseen) of each record, the tokenizer fitted on training captions first (only run when a
        caption store is prepared)."""
        if not self.tokenizer.is_fitted:
            self.tokenizer.fit([caption for record in train_records for caption in record.captions])
        training = caption_set(caption for record in train_records for caption in record.captions) if unseen else None
        for record in records:
            yield record.captions, None if training is None else is_unseen(record.captions, training)

    def _store(self, split: str, records: list[ImageCaption], bad_samples: BadSamples) -> ExampleStore:
        """A split's image store (prepared when missing), its skips told to ``bad_samples``."""
        folder = self.store_folder("images", *image_key(self.source, records, self.image_size))
        return image_store(self.source, records, self.image_size, folder, self.prepare_workers, bad_samples, split)

    def _load(self, split: str, records: list[ImageCaption]) -> tuple[ExampleStore, list[ImageCaption]]:
        """The split's store and the records whose image it holds, in store row order."""
        store = self._store(split, records, self.bad_samples)
        return store, [records[int(i)] for i in store.column("index")]

    def _encode(self, store: ExampleStore, records: list[ImageCaption], captions: ExampleStore, train: bool
                ) -> CaptionDataset:
        rows, texts = [], []  # (store row, caption ids, references, key, objects); the caption of each row
        unseen = []
        for index, record in enumerate(records):
            references = list(record.captions)
            ids = captions.value("ids", index)
            for caption, caption_ids in zip(references if train else references[:1], ids, strict=False):
                rows.append((index, caption_ids, references, record.key, record.objects))
                texts.append(caption)
            if not train:
                unseen.append(captions.value("unseen", index))
        if train:
            rows = self._drop_bad_captions(rows, texts)
        columns = list(zip(*rows, strict=True)) if rows else [[]] * 5
        transform = image_transform(train, self.image_size, augment=self.augment, hflip=self.hflip)
        if train:
            return CaptionDataset(store, *[list(c) for c in columns], transform=transform, train=True)
        return CaptionDataset(
            store, *[list(c) for c in columns], transform=transform, masks=bool(store.meta["masked"]), unseen=unseen,
        )

    def _drop_bad_captions(self, rows: list[tuple], texts: list[str]) -> list[tuple]:
        """Training rows whose caption is empty or over ``max_target_len`` words are bad samples (skipped)."""
        self.bad_samples.begin("train", "length")
        kept = []
        for row, text in zip(rows, texts, strict=True):
            length = len(row[1])
            if 0 < length <= self.max_target_len:
                kept.append(row)
            elif length == 0:
                problem = f"caption {text!r} has no words"
                self.bad_samples.skip("train", "length", f"image {row[3]}", "empty caption", problem)
            else:
                problem = (
                    f"caption {text[:60]!r} has {length} words, over data.max_target_len={self.max_target_len} "
                    "(raise it to keep such captions)"
                )
                self.bad_samples.skip("train", "length", f"image {row[3]}", "caption over max_target_len", problem)
        self.dropped = len(rows) - len(kept)
        if self.dropped:
            log.info("dropped %d training captions (empty or over %d words)", self.dropped, self.max_target_len)
        self.bad_samples.end("train", "length", len(rows), "captions")
        return kept

    # what the model, the run's examples and prediction need -----------------------------------
    def encoder_kwargs(self) -> dict[str, int]:
        return {}

    def _collate(self) -> CaptionCollate:
        return CaptionCollate(self.tokenizer.pad_id, self.tokenizer.bos_id, self.tokenizer.eos_id)

    def readable_source(self, batch: dict[str, Any], index: int) -> np.ndarray:
        """The source of one batch row as a person sees it: its image, (H, W, 3) uint8 (a batch of stored
        features carries the images as ``pixels``)."""
        if "pixels" in batch:
            return batch["pixels"][index].permute(1, 2, 0).cpu().numpy()
        return denormalize(batch["src"][index])

    def batch_from_sources(self, sources: list[str]) -> dict[str, Any]:
        """A batch of image files (prediction); raises ImageReadError naming an unreadable file."""
        transform = image_transform(False, self.image_size)
        examples = [
            {"image": transform(to_uint8_tensor(square_resize(read_rgb(path), self.image_size))), "tgt": [],
             "id": i, "source": path, "reference": [], "objects": ()}
            for i, path in enumerate(sources)
        ]
        return self._collate()(examples)


def captions_hash(records: list[ImageCaption]) -> str:
    """A hash of every caption of ``records``, in order (0.2 s for 250k captions)."""
    digest = hashlib.sha1()
    for record in records:
        for caption in record.captions:
            digest.update(caption.encode("utf-8"))
            digest.update(b"\n")
        digest.update(b"\0")
    return digest.hexdigest()


def tokenize_captions(tokenizer: Tokenizer):
    """What preparing a caption store does with a chunk of (captions, unseen) items: one row each."""

    def tokenize(items: list[tuple[tuple[str, ...], bool | None]], first: int) -> Shard:
        columns = {"ids": pa.array([[tokenizer.encode(c) for c in captions] for captions, _ in items],
                                   type=pa.list_(pa.list_(pa.int32())))}
        if items and items[0][1] is not None:
            columns["unseen"] = pa.array([flag for _, flag in items], type=pa.bool_())
        return Shard(columns)

    return tokenize
