"""Images with tokenized captions, and the collate function that batches them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from attend.data.collate import Ragged, TargetCollate
from attend.data.images import SceneObject
from attend.data.images.features import feature_versions, stored_features
from attend.data.images.pixels import store_mask, store_pixels
from attend.data.store import ExampleStore


class CaptionDataset(Dataset):
    """One example per (image, caption) pair: ``rows[i]`` picks the image's row of ``store`` (the split's image
    store, ``attend.data.images.pixels.image_store``), ``captions[i]`` the ids of the caption to predict;
    ``references[i]`` holds every caption of that image.

    Pixels stay in the memory-mapped store and are copied out per example in ``__getitem__``, so loader workers
    do that work and share one copy of the images (the page cache's); in RAM are only the rows, the caption ids
    and the records' small fields.

    With ``features`` (a feature store row-aligned with ``store``, ``attend.data.images.features``) an example's
    ``image`` is the frozen encoder's features (C, h, w) instead of pixels: in training a random one of the
    stored versions (the image and its fixed crops), else the image as it is; evaluation examples then also
    carry their ``pixels`` (3, H, W) uint8, which the attention plots draw.
    """

    def __init__(
        self,
        store: ExampleStore,
        rows: Sequence[int],
        captions: Sequence[Sequence[int]],
        references: list[list[str]],
        keys: list[str],
        objects: list[tuple[SceneObject, ...]],
        transform: Callable[[Tensor], Tensor],
        masks: bool = False,
        unseen: Sequence[bool] | None = None,
        features: ExampleStore | None = None,
        train: bool = False,
    ) -> None:
        if not len(rows) == len(captions) == len(references) == len(keys) == len(objects):
            raise ValueError("rows, captions, references, keys and objects must have the same length")
        self.store = store  # pickled by folder: a loader worker maps the files again instead of copying them
        self.rows = np.asarray(rows, dtype=np.int64)  # (N,) store row of each example's image
        self.captions = Ragged(captions)
        self.references = references
        self.keys = keys
        self.objects = objects
        self.transform = transform
        # evaluation only (the training crop and flip would move the object): whether examples carry the object
        # masks of the store; per example whether no reference occurs in training
        self.masks = masks
        if unseen is not None and len(unseen) != len(self.rows):
            raise ValueError("unseen must have one entry per example")
        self.unseen = None if unseen is None else list(unseen)
        self.features = features
        self.train = train

    def with_features(self, features: ExampleStore | None) -> CaptionDataset:
        """This dataset reading ``features`` (row-aligned with its image store) instead of pixels."""
        self.features = features
        return self

    def image(self, index: int) -> Tensor:
        """What the encoder reads for an example: stored features (C, h, w), or transformed pixels (3, H, W)."""
        if self.features is None:
            return self.transform(self.pixels(index))
        versions = feature_versions(self.features) if self.train else 1
        version = int(torch.randint(versions, ())) if versions > 1 else 0
        return stored_features(self.features, int(self.rows[index]), version)

    def __len__(self) -> int:
        return len(self.rows)

    def pixels(self, index: int) -> Tensor:
        """(3, H, W) uint8 of an example's image, as stored (before the transform)."""
        return store_pixels(self.store, int(self.rows[index]))

    def object_mask(self, index: int) -> Tensor | None:
        """(H, W) uint8 object mask of an example's image (255: all object); None where it has none."""
        return store_mask(self.store, int(self.rows[index]))

    def __getitem__(self, index: int) -> dict[str, Any]:
        example = {
            "image": self.image(index),
            "tgt": self.captions[index],
            "id": index,
            "source": self.keys[index],
            "reference": self.references[index],
            "objects": self.objects[index],
        }
        if self.masks:  # (H, W) float in [0, 1], None: the image has no mask
            mask = self.object_mask(index)
            example["object_mask"] = None if mask is None else mask.float() / 255.0
        if self.unseen is not None:
            example["unseen"] = self.unseen[index]
        if self.features is not None and not self.train:
            example["pixels"] = self.pixels(index)
        return example

    def lengths(self) -> Tensor:
        """Bucketing length per example: the caption's, with bos/eos."""
        return self.captions.lengths + 2


class CaptionCollate(TargetCollate):
    """Stacks images (B, 3, H, W) and pads captions with bos/eos; no ``src_lengths`` (every cell is real).

    ``src`` holds stored features (B, C, h, w) where the data module precomputes them; evaluation batches then
    also hold ``pixels`` (B, 3, H, W) uint8, the images as stored. Evaluation batches of sources with object
    masks also hold ``object_masks`` (B, H, W) float in [0, 1]
    and ``has_object_mask`` (B,) bool (False: no mask, its row is 0); those of data sets that know their
    training captions hold ``unseen`` (B,) bool: no reference of the example occurs among them.
    """

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = {
            "src": torch.stack([e["image"] for e in examples]),  # (B, 3, H, W)
            **self.targets(examples),  # references: lists of captions
            # named objects of each scene (data=shapes) as plain dicts, which Lightning moves between devices as is
            "objects": [[{"kind": o.kind, "box": o.box} for o in e["objects"]] for e in examples],
        }
        if examples and "pixels" in examples[0]:
            batch["pixels"] = torch.stack([e["pixels"] for e in examples])  # (B, 3, H, W) uint8
        masks = [e.get("object_mask") for e in examples]
        shape = next((m.shape for m in masks if m is not None), None)
        if shape is not None:
            batch["object_masks"] = torch.stack([torch.zeros(shape) if m is None else m for m in masks])  # (B, H, W)
            batch["has_object_mask"] = torch.tensor([m is not None for m in masks], dtype=torch.bool)  # (B,)
        if examples and all("unseen" in e for e in examples):
            batch["unseen"] = torch.tensor([e["unseen"] for e in examples], dtype=torch.bool)  # (B,)
        return batch
