"""Alignment error against a known alignment: does each output character attend where it comes from?"""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

from attend.metrics.base import Decoded


class AlignmentError(Metric):
    """Share of output characters whose strongest source position lies outside their true source span, in percent.

    ``batch["alignments"]`` gives, for each row, each reference character's [start, end) span of
    source characters (or None: no source character, such as the hyphens of an ISO date); data=dates
    provides it. The decoded output may differ from the reference, so only steps whose decoded
    token equals the reference character at the same position are compared: targets must be
    character level (one token per character). Rows without an alignment, batches without
    ``alignments`` and memories over an image grid are not counted.
    """

    higher_is_better = False
    batch_fields = ("alignments",)  # a batch field the data adds (DatePairs); eval.py on data without it leaves it out
    full_state_update = False  # each update adds to sums: states of ranks or batches merge by addition

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("errors", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, decoded: Decoded) -> None:
        batch, result = decoded.batch, decoded.result
        if result.grid is not None or "alignments" not in batch:
            return
        peaks = result.weights.detach().argmax(dim=-1).cpu()  # (B, T): the strongest source position of each step
        errors = count = 0
        rows = zip(batch["alignments"], decoded.references, strict=True)
        for i, (spans, reference) in enumerate(rows):
            if spans is None:
                continue
            tokens = decoded.output_tokens(i)
            for t, (token, expected, span) in enumerate(zip(tokens, reference, spans, strict=False)):
                if span is None or token != expected:
                    continue
                start, end = span
                errors += not start <= int(peaks[i, t]) < end
                count += 1
        self.errors += errors
        self.count += count

    def compute(self) -> Tensor:
        return 100.0 * self.errors.double() / self.count.clamp(min=1).double()
