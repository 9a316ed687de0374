"""Memory: what every encoder returns, whatever the modality."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor


@dataclass(frozen=True)
class Memory:
    """Encoder output that attention reads from.

    values: (B, S, D) one vector per source position (token, image cell, audio frame)
    mask:   (B, S) bool, True where the position is real
    grid:   (H, W) for images (S == H*W, row-major), None otherwise
    keys:   cached key projection set by ``Attention.prepare`` (layout is the attention's own)
    projected_values: cached value projection (multi-head attention), None when values are used as is
    final:  (B, D) a summary of the source (last states, mean of cells) for initial decoder states
    """

    values: Tensor
    mask: Tensor
    grid: tuple[int, int] | None = None
    keys: Tensor | None = None
    projected_values: Tensor | None = None
    final: Tensor | None = None

    @property
    def lengths(self) -> Tensor:
        return self.mask.sum(dim=1)

    def replace(self, **changes) -> Memory:
        return replace(self, **changes)

    def index_select(self, index: Tensor) -> Memory:
        """Rows ``index`` of the batch (beam tiling and reordering)."""

        def pick(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.index_select(0, index)

        return Memory(
            values=pick(self.values),
            mask=pick(self.mask),
            grid=self.grid,
            keys=pick(self.keys),
            projected_values=pick(self.projected_values),
            final=pick(self.final),
        )

    def repeat_interleave(self, times: int) -> Memory:
        """Each row ``times`` times in a row: (B, ...) -> (B*times, ...) for beam search."""
        index = torch.arange(self.values.size(0), device=self.values.device).repeat_interleave(times)
        return self.index_select(index)


def length_mask(lengths: Tensor, size: int) -> Tensor:
    """(B,) lengths -> (B, size) bool, True on the first ``lengths[b]`` positions."""
    return torch.arange(size, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
