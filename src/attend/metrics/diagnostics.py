"""Attention diagnostics for every task: how spread out the weights are and how evenly they cover the source."""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

from attend.memory import length_mask
from attend.metrics.base import Decoded
from attend.search import SearchResult


def real_masks(result: SearchResult) -> tuple[Tensor, Tensor]:
    """(B, T) bool: the first ``lengths[b]`` output steps; (B, S) bool: the valid source positions."""
    batch, steps, positions = result.weights.shape
    device = result.weights.device
    steps_mask = length_mask(result.lengths.to(device), steps)  # (B, T)
    if result.source_lengths is None:
        return steps_mask, torch.ones(batch, positions, dtype=torch.bool, device=device)
    return steps_mask, length_mask(result.source_lengths.to(device), positions)  # (B, T), (B, S)


class AttentionEntropy(Metric):
    """Mean entropy, in nats, of each real output step's attention over the valid source positions.

    0 for one-hot (hard) attention, log n for uniform weights over n positions. With ``normalized``
    each step's entropy is divided by log n (0 where n is 1), reported in percent: 100 is uniform.
    Over the decoded outputs, end token included; source padding and steps after the end are not counted.
    """

    higher_is_better = False  # peaked attention; a diagnostic rather than a goal
    full_state_update = False  # each update adds to sums: states of ranks or batches merge by addition

    def __init__(self, normalized: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.normalized = normalized
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("steps", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, decoded: Decoded) -> None:
        steps_mask, source_mask = real_masks(decoded.result)
        weights = decoded.result.weights.detach().float() * source_mask.unsqueeze(1)  # (B, T, S)
        entropy = -torch.special.xlogy(weights, weights).sum(dim=-1).double()  # (B, T): 0 log 0 = 0
        if self.normalized:
            log_n = source_mask.sum(dim=1).double().log().unsqueeze(1)  # (B, 1)
            entropy = torch.where(log_n > 0, 100.0 * entropy / log_n.clamp(min=1e-12), torch.zeros_like(entropy))
        self.total += entropy[steps_mask].sum().to(self.total.device)
        self.steps += steps_mask.sum().to(self.steps.device)

    def compute(self) -> Tensor:
        return self.total / self.steps.clamp(min=1)


class CoverageDeficit(Metric):
    """Mean over valid source positions of |1 - total attention the position got over the real output steps|.

    0 when every position receives one unit of attention in all (a one-to-one alignment); positions
    skipped or attended again and again raise it (the coverage problem of Tu et al. 2016). The units
    to share out are the output steps, end token included, so outputs shorter or longer than the
    source cannot reach 0: compare models on the same data.
    """

    higher_is_better = False
    full_state_update = False  # each update adds to sums: states of ranks or batches merge by addition

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("positions", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, decoded: Decoded) -> None:
        steps_mask, source_mask = real_masks(decoded.result)
        weights = decoded.result.weights.detach().float() * steps_mask.unsqueeze(-1)  # (B, T, S)
        coverage = weights.sum(dim=1).double()  # (B, S)
        self.total += (1.0 - coverage).abs()[source_mask].sum().to(self.total.device)
        self.positions += source_mask.sum().to(self.positions.device)

    def compute(self) -> Tensor:
        return self.total / self.positions.clamp(min=1)
