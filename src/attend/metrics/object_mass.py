"""Attention on the object of an image with an object mask (Tux Paint stamps: the alpha channel)."""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

from attend.metrics.base import Decoded
from attend.search import SearchResult


def area_matrix(pixels: int, cells: int) -> Tensor:
    """(cells, pixels): the share of each cell's extent that each pixel covers (rows sum to one), on one 0..1 axis."""
    pixel_edges = torch.arange(pixels + 1, dtype=torch.float64) / pixels  # (pixels + 1,)
    cell_edges = torch.arange(cells + 1, dtype=torch.float64) / cells  # (cells + 1,)
    low = torch.maximum(cell_edges[:-1].unsqueeze(1), pixel_edges[:-1].unsqueeze(0))  # (cells, pixels)
    high = torch.minimum(cell_edges[1:].unsqueeze(1), pixel_edges[1:].unsqueeze(0))  # (cells, pixels)
    return (high - low).clamp(min=0) * cells


def cell_coverage(masks: Tensor, grid: tuple[int, int]) -> Tensor:
    """(B, H*W) row-major: the exact area-average of masks (B, h, w) in [0, 1] over each cell of the (H, W) grid."""
    height, width = grid
    rows = area_matrix(masks.size(1), height).to(masks.device)  # (H, h)
    cols = area_matrix(masks.size(2), width).to(masks.device)  # (W, w)
    return torch.einsum("yh,bhw,xw->byx", rows, masks.double(), cols).flatten(1)  # (B, H*W)


def caption_steps(result: SearchResult) -> Tensor:
    """(B, T) bool: the steps that output a caption token (the end token and padding excluded)."""
    lengths = result.lengths.to(result.tokens.device)  # (B,) the end token included when there is one
    last = result.tokens.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # (B,)
    words = lengths - ((last == result.eos_id) & (lengths > 0)).long()  # (B,)
    steps = torch.arange(result.weights.size(1), device=words.device)  # (T,)
    return steps.unsqueeze(0) < words.unsqueeze(1)


class ObjectMass(Metric):
    """Mean attention mass on the object, a fraction 0..1: over every output token of the decoded captions
    but the end token, sum_s alpha_ts * c_s, where c_s is the share of cell s covered by the object mask.

    ``batch["object_masks"]`` (B, h, w) in [0, 1] (the image's object, letterboxed like its pixels) is
    area-averaged exactly onto the memory's grid; rows with ``batch["has_object_mask"]`` False (an opaque
    image: no mask), batches without masks and memories without a grid are not counted.
    ``ObjectArea`` gives the chance level on the same tokens.
    """

    higher_is_better = True
    batch_fields = ("object_masks",)  # a batch field the data adds (Tux Paint); eval.py on data without it drops it

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def token_scores(self, weights: Tensor, coverage: Tensor) -> Tensor:
        """(B, T): the object mass of each step's attention, weights (B, T, S) and coverage (B, S)."""
        return torch.einsum("bts,bs->bt", weights, coverage)

    def update(self, decoded: Decoded) -> None:
        batch, result = decoded.batch, decoded.result
        if result.grid is None or "object_masks" not in batch:
            return
        masks = batch["object_masks"].to(result.weights.device)  # (B, h, w)
        coverage = cell_coverage(masks, result.grid)  # (B, S)
        counted = caption_steps(result) & batch["has_object_mask"].to(masks.device).unsqueeze(1)  # (B, T)
        scores = self.token_scores(result.weights.detach().double(), coverage)  # (B, T)
        self.total += scores[counted].sum().to(self.total.device)
        self.count += counted.sum().to(self.count.device)

    def compute(self) -> Tensor:
        return self.total / self.count.clamp(min=1)


class ObjectArea(ObjectMass):
    """The chance level of ``ObjectMass``: what uniform attention would score on the same tokens, the mean of
    each token's mean_s c_s (the share of the image's cells the object covers), a fraction 0..1."""

    higher_is_better = None

    def token_scores(self, weights: Tensor, coverage: Tensor) -> Tensor:
        return coverage.mean(dim=1, keepdim=True).expand(-1, weights.size(1))  # (B, T)
