"""The LightningDataModule for image captioning: images -> Memory over grid cells, captions -> words."""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from attend.data.base import TargetTextDataModule
from attend.data.images import ImageCaption, read_rgb
from attend.data.images.dataset import CaptionCollate, CaptionDataset
from attend.data.images.pixels import (
    LoadedImages,
    denormalize,
    image_transform,
    load_pixels,
    square_resize,
    to_uint8_tensor,
)
from attend.data.tokenizers.tokenizer import Tokenizer
from attend.data.unseen import caption_set, is_unseen

log = logging.getLogger("attend.data")


class CaptionDataModule(TargetTextDataModule):
    """Records from ``source`` (``splits()`` and ``load_image(record)``), images cached as uint8
    ``image_size`` squares, captions tokenized by ``tokenizer`` (fitted on training captions).

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
    ) -> None:
        super().__init__(
            source, tokenizer, batch_size, eval_batch_size, num_workers, seed, cache_dir,
            on_error=on_error, max_skip_fraction=max_skip_fraction,
        )
        self.image_size = image_size
        self.augment = augment
        self.hflip = hflip
        self.max_target_len = max_target_len
        # self.loaded: split -> (LoadedImages, records whose image could be read)
        self.dropped = 0  # training captions dropped by the length filter

    # data ------------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Read and cache every split's images once (local rank 0); without a cache ``setup`` reads them."""
        if self.cache_dir is None or self.prepared:
            return  # reading here too would read every image twice
        silent = self.bad_samples.cache_pass()  # setup reads the cache and reports the skips
        for name, records in self.source_splits().items():
            load_pixels(self.source, records, self.image_size, self.cache_dir, silent, name)

    def setup(self, stage: str | None = None) -> None:
        """Read splits and cached images, fit the tokenizer on training captions, tokenize (idempotent)."""
        if self.datasets:
            return
        self.loaded = {name: self._load(name, records) for name, records in self.source_splits().items()}
        if not self.tokenizer.is_fitted:
            self.tokenizer.fit([caption for record in self.loaded["train"][1] for caption in record.captions])
        self._encode_splits()
        log.info(
            "images: train %d (%d captions), val %d, test %d; vocabulary %d words",
            len(self.loaded["train"][1]), len(self.datasets["train"]), len(self.datasets["val"]),
            len(self.datasets["test"]), self.tokenizer.vocab_size,
        )
        self.bad_samples.log_summary()

    def _encode_splits(self) -> None:
        training = caption_set(caption for record in self.loaded["train"][1] for caption in record.captions)
        for name, (images, records) in self.loaded.items():
            self.datasets[name] = self._encode(images, records, train=name == "train", training=training)

    def _load(self, split: str, records: list[ImageCaption]):
        images = load_pixels(self.source, records, self.image_size, self.cache_dir, self.bad_samples, split)
        return images, [records[i] for i in images.kept]

    def _encode(
        self, images: LoadedImages, records: list[ImageCaption], train: bool, training: frozenset[str] = frozenset()
    ) -> CaptionDataset:
        rows, texts = [], []  # (image index, caption ids, references, key, objects); the caption of each row
        for index, record in enumerate(records):
            references = list(record.captions)
            for caption in references if train else references[:1]:
                rows.append((index, self.tokenizer.encode(caption), references, record.key, record.objects))
                texts.append(caption)
        if train:
            rows = self._drop_bad_captions(rows, texts)
        columns = list(zip(*rows, strict=True)) if rows else [[]] * 5
        transform = image_transform(train, self.image_size, augment=self.augment, hflip=self.hflip)
        if train:
            return CaptionDataset(images.pixels, *[list(c) for c in columns], transform=transform)
        return CaptionDataset(
            images.pixels, *[list(c) for c in columns], transform=transform, masks=images.masks,
            has_mask=images.has_mask, unseen=[is_unseen(references, training) for references in columns[2]],
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

    # what the model, plots and prediction need ---------------------------------------------
    def encoder_kwargs(self) -> dict[str, int]:
        return {}

    def _collate(self) -> CaptionCollate:
        return CaptionCollate(self.tokenizer.pad_id, self.tokenizer.bos_id, self.tokenizer.eos_id)

    def plot_source(self, batch: dict[str, Any], index: int) -> np.ndarray:
        """The image of one batch row, (H, W, 3) uint8, for attention plots."""
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
