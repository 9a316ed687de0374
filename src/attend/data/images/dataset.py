"""Images with tokenized captions, and the collate function that batches them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Dataset

from attend.data.collate import Ragged, TargetCollate
from attend.data.images import SceneObject


class CaptionDataset(Dataset):
    """One example per (image, caption) pair: ``image_index[i]`` picks the pixels, ``captions[i]``
    the ids of the caption to predict; ``references[i]`` holds every caption of that image.
    """

    def __init__(
        self,
        pixels: Tensor,
        image_index: Sequence[int],
        captions: Sequence[Sequence[int]],
        references: list[list[str]],
        keys: list[str],
        objects: list[tuple[SceneObject, ...]],
        transform: Callable[[Tensor], Tensor],
        masks: Tensor | None = None,
        has_mask: Tensor | None = None,
        unseen: Sequence[bool] | None = None,
    ) -> None:
        if not len(image_index) == len(captions) == len(references) == len(keys) == len(objects):
            raise ValueError("image_index, captions, references, keys and objects must have the same length")
        self.pixels = pixels  # (N, 3, H, W) uint8, shared by the examples of one image
        self.image_index = list(image_index)
        self.captions = Ragged(captions)
        self.references = references
        self.keys = keys
        self.objects = objects
        self.transform = transform
        # evaluation only (the training crop and flip would move the object): (N, H, W) uint8 object masks of the
        # images and (N,) bool whether each has one; per example whether no reference occurs in training
        self.masks = masks
        self.has_mask = has_mask
        if unseen is not None and len(unseen) != len(self.image_index):
            raise ValueError("unseen must have one entry per example")
        self.unseen = None if unseen is None else list(unseen)

    def __len__(self) -> int:
        return len(self.image_index)

    def __getitem__(self, index: int) -> dict[str, Any]:
        image = self.image_index[index]
        example = {
            "image": self.transform(self.pixels[image]),
            "tgt": self.captions[index],
            "id": index,
            "source": self.keys[index],
            "reference": self.references[index],
            "objects": self.objects[index],
        }
        if self.masks is not None:  # (H, W) float in [0, 1], None: the image has no mask
            example["object_mask"] = self.masks[image].float() / 255.0 if bool(self.has_mask[image]) else None
        if self.unseen is not None:
            example["unseen"] = self.unseen[index]
        return example

    def lengths(self) -> Tensor:
        """Bucketing length per example: the caption's, with bos/eos."""
        return self.captions.lengths + 2


class CaptionCollate(TargetCollate):
    """Stacks images (B, 3, H, W) and pads captions with bos/eos; no ``src_lengths`` (every cell is real).

    Evaluation batches of sources with object masks also hold ``object_masks`` (B, H, W) float in [0, 1]
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
        masks = [e.get("object_mask") for e in examples]
        shape = next((m.shape for m in masks if m is not None), None)
        if shape is not None:
            batch["object_masks"] = torch.stack([torch.zeros(shape) if m is None else m for m in masks])  # (B, H, W)
            batch["has_object_mask"] = torch.tensor([m is not None for m in masks], dtype=torch.bool)  # (B,)
        if examples and all("unseen" in e for e in examples):
            batch["unseen"] = torch.tensor([e["unseen"] for e in examples], dtype=torch.bool)  # (B,)
        return batch
