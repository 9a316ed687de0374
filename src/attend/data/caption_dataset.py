"""Images with tokenized captions, and the collate function that batches them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Dataset

from attend.data.dataset import Ragged, TargetCollate
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

    def __len__(self) -> int:
        return len(self.image_index)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {
            "image": self.transform(self.pixels[self.image_index[index]]),
            "tgt": self.captions[index],
            "id": index,
            "source": self.keys[index],
            "reference": self.references[index],
            "objects": self.objects[index],
        }

    def lengths(self) -> Tensor:
        """Bucketing length per example: the caption's, with bos/eos."""
        return self.captions.lengths + 2


class CaptionCollate(TargetCollate):
    """Stacks images (B, 3, H, W) and pads captions with bos/eos; no ``src_lengths`` (every cell is real)."""

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "src": torch.stack([e["image"] for e in examples]),  # (B, 3, H, W)
            **self.targets(examples),  # references: lists of captions
            # named objects of each scene (data=shapes) as plain dicts, which Lightning moves between devices as is
            "objects": [[{"kind": o.kind, "box": o.box} for o in e["objects"]] for e in examples],
        }
