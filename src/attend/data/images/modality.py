"""The image plug-in: images kept as uint8 squares in the encoded store, captions as targets, and a frozen
encoder's features stored once (``attend.data.images.features``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from attend.data.images.features import FeatureExtractor, crop_key, feature_store, feature_versions, stored_features
from attend.data.images.pixels import (
    denormalize,
    image_transform,
    read_mask,
    square_resize,
    store_mask,
    store_pixels,
    to_uint8_tensor,
)
from attend.data.images.record import ImageCaption, ImageReadError, SceneObject, read_rgb
from attend.data.modality import Modality, file_skip, json_column, path_or_none, strings
from attend.data.store import ExampleStore

log = logging.getLogger("attend.data")


class ImageModality(Modality):
    """Records are ``ImageCaption``s read through the source's ``load_image`` (and ``load_mask``), letterboxed to
    ``image_size`` squares; unreadable images are skips. Batches add ``objects`` and, in evaluation, ``unseen`` and,
    for sources with masks, ``object_masks`` (B, H, W) in [0, 1] with ``has_object_mask`` (B,). ``augment``: a light
    random crop in training, ``hflip`` a random flip. ``precompute_features``: a frozen encoder part's features are
    stored once per image (``feature_crops`` crops besides, in training) and batched as ``src``, with the images as
    ``pixels`` in evaluation."""

    name = "image"
    unit = "images"
    example_unit = "captions"
    several_references = marks_unseen = True
    source_has_size = src_lengths = False
    read_error = ImageReadError

    def __init__(self, image_size: int = 64, augment: bool = True, hflip: bool = False,
                 precompute_features: bool = True, feature_crops: int = 0) -> None:
        if feature_crops < 0:
            raise ValueError(f"data.modality.feature_crops must be 0 or more, got {feature_crops}")
        self.image_size = image_size
        self.precompute_features = precompute_features
        self.feature_crops = feature_crops
        self.transforms = {train: image_transform(train, image_size, augment=augment, hflip=hflip)
                           for train in (True, False)}
        self.extractor: FeatureExtractor | None = None
        self.features: dict[str, ExampleStore] = {}  # encoded store folder -> its feature store

    def bind(self, source) -> None:
        if not callable(getattr(source, "load_image", None)):  # attend.data.Corpora chains text and speech only
            raise ValueError(f"data.source {type(source).__name__} gives no images (load_image): the image plug-in "
                             "reads each image through its caption source; use one image source")
        super().bind(source)

    @property
    def masked(self) -> bool:
        """Whether the source gives object masks (``load_mask(record)`` -> "L" image or None)."""
        return callable(getattr(self.source, "load_mask", None))

    def settings(self) -> dict[str, Any]:
        return {"size": self.image_size, "masked": self.masked}

    def record_columns(self, records: list[ImageCaption]) -> dict[str, Any]:
        return {
            "key": strings([r.key for r in records]),
            "path": strings([path_or_none(r.path) for r in records]),
            "references": pa.array([list(r.captions) for r in records], type=pa.list_(pa.string())),
            "objects": json_column([[[o.kind, list(o.box), o.word_index] for o in r.objects] for r in records]),
        }

    @staticmethod
    def record(records: ExampleStore, row: int) -> ImageCaption:
        objects = tuple(SceneObject(kind, tuple(box), word) for kind, box, word in
                        json.loads(records.value("objects", row)))
        return ImageCaption(records.value("key", row), tuple(records.value("references", row)),
                            records.value("path", row), objects)

    def encode(self, records: ExampleStore, rows: list[int]) -> tuple[dict[str, Any], list]:
        kept, pixels, masks, skipped = [], [], [], []
        for row in rows:
            record = self.record(records, row)
            try:
                image = to_uint8_tensor(square_resize(self.source.load_image(record), self.image_size))  # (3, s, s)
                mask = read_mask(self.source, record, self.image_size) if self.masked else None  # (s, s) or None
            except ImageReadError as problem:
                skipped.append(file_skip(record.path, record.key, problem, "corrupt image"))
                continue
            kept.append(row)
            pixels.append(image.numpy().tobytes())
            masks.append(None if mask is None else mask.numpy().tobytes())
        columns = {"row": kept, "pixels": pa.array(pixels, type=pa.binary()),
                   "source_size": pa.array(np.zeros(len(kept), np.int32))}
        if self.masked:
            columns["mask"] = pa.array(masks, type=pa.binary())
        return columns, skipped

    def example(self, encoded: ExampleStore, row: int, records: ExampleStore, record_row: int, train: bool
                ) -> dict[str, Any]:
        features = self.features.get(encoded.folder.name)
        if features is None:
            image = self.transforms[train](store_pixels(encoded, row))  # (3, H, W) float
        else:
            versions = feature_versions(features) if train else 1
            image = stored_features(features, row, int(torch.randint(versions, ())) if versions > 1 else 0)
        objects = json.loads(records.value("objects", record_row))
        example: dict[str, Any] = {"src": image, "objects": [{"kind": k, "box": tuple(box)} for k, box, _ in objects]}
        if features is not None and not train:
            example["pixels"] = store_pixels(encoded, row)  # (3, H, W) uint8, what the plots draw
        if self.masked and not train:  # the training crop and flip would move the object
            mask = store_mask(encoded, row)
            empty = torch.zeros(self.image_size, self.image_size)
            example["object_masks"] = empty if mask is None else mask.float() / 255.0  # (H, W) in [0, 1]
            example["has_object_mask"] = mask is not None
        return example

    def use_frozen_features(self, extractor: FeatureExtractor, datamodule) -> None:
        if not self.precompute_features:
            return
        self.extractor = extractor
        for split, encoded in datamodule.encoded.items():
            self.prepare_split(encoded, split, datamodule)

    def prepare_split(self, encoded: ExampleStore, split: str, datamodule) -> None:
        """The split's feature store, when there is an extractor: training with its crops, the rest without."""
        if self.extractor is None:
            return
        crops = self.feature_crops if split == "train" else 0
        folder = datamodule.store_folder("image_features", encoded.folder.name, self.extractor.key, crop_key(crops),
                                         datamodule.seed)
        log.info("image features of the %s split: %s", split, self.extractor.key)
        self.features[encoded.folder.name] = feature_store(encoded, self.extractor, crops, datamodule.seed, folder,
                                                           f"{split} image features")

    def readable_source(self, batch: dict[str, Any], index: int) -> np.ndarray:
        """The image, (H, W, 3) uint8 (a batch of stored features carries the images as ``pixels``)."""
        if "pixels" in batch:
            return batch["pixels"][index].permute(1, 2, 0).cpu().numpy()
        return denormalize(batch["src"][index])

    def sources_to_examples(self, sources: list[str]) -> list[dict[str, Any]]:
        """Image files; ImageReadError names an unreadable one."""
        to_tensor = lambda path: to_uint8_tensor(square_resize(read_rgb(path), self.image_size))  # noqa: E731
        return [{"src": self.transforms[False](to_tensor(path)), "objects": []} for path in sources]
