"""How monotone an alignment is: speech and translation attend mostly left to right."""

from __future__ import annotations

import torch
from torchmetrics import Metric

from attend.metrics.base import Decoded


class MonotoneAlignment(Metric):
    """Share of output steps whose strongest source position is not behind the previous step's, in percent.

    A step may fall back by up to ``tolerance`` positions and still count as forward (neighbouring
    encoder frames of one sound trade places). Over the decoded outputs, end token included;
    memories over an image grid are not counted.
    """

    higher_is_better = True

    def __init__(self, tolerance: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tolerance = tolerance
        self.add_state("forward", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("moves", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, decoded: Decoded) -> None:
        result = decoded.result
        if result.grid is not None or result.weights.size(1) < 2:
            return
        peaks = result.weights.argmax(dim=-1)  # (B, T)
        steps = torch.arange(1, peaks.size(1), device=peaks.device)  # (T-1,)
        real = steps.unsqueeze(0) < result.lengths.to(peaks.device).unsqueeze(1)  # (B, T-1): a move to a real step
        forward = (peaks[:, 1:] - peaks[:, :-1]) >= -self.tolerance  # (B, T-1)
        self.forward += (forward & real).sum().to(self.forward.device)
        self.moves += real.sum().to(self.moves.device)

    def compute(self) -> torch.Tensor:
        return 100.0 * self.forward.double() / self.moves.clamp(min=1).double()
