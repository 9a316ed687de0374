"""A text metric on the evaluation examples whose references do not occur among the training captions."""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics import Metric

from attend.metrics.base import Decoded


class UnseenOnly(Metric):
    """``metric`` (a text metric) on the rows with ``batch["unseen"]`` True.

    A caption that also occurs verbatim in training can be recalled rather than described (29 of the 120
    Tux Paint test stamps, 166 of the 300 shape scenes): this scores only the others. The wrapped metric
    gets the text view of those rows (``Decoded.text_rows``: their hypotheses and references).
    Batches without ``unseen`` count nothing; with nothing counted the value is the wrapped metric's empty
    value (0 for CaptionBLEU and CIDErD). The wrapped metric is a child module that keeps the states: it
    syncs them under DDP in its own ``compute`` (as torchmetrics' CompositionalMetric does), and ``reset``
    resets it.
    """

    higher_is_better = True  # the caption scores it wraps (BLEU, CIDEr-D)
    batch_fields = ("unseen",)  # a batch field the data adds (captions); eval.py on data without it leaves it out

    def __init__(self, metric: Metric, **kwargs) -> None:
        super().__init__(**kwargs)
        self.metric = metric

    def update(self, decoded: Decoded) -> None:
        unseen = decoded.batch.get("unseen", [])  # (B,) bool tensor, or a list
        flags = unseen.tolist() if isinstance(unseen, torch.Tensor) else list(unseen)
        rows = [i for i, new in enumerate(flags) if new]
        # always update, even with no row, so the wrapped metric knows it was updated (no warning at compute)
        self.metric.update(decoded.text_rows(rows))

    def compute(self) -> Any:
        return self.metric.compute()  # the wrapped metric's compute syncs its states across processes

    def _sync_dist(self, dist_sync_fn=None, process_group=None) -> None:
        """No states of its own to sync: the wrapped metric syncs its states when it computes."""

    def _wrap_compute(self, compute):
        return compute  # no caching or syncing here: the wrapped metric's compute does both

    def reset(self) -> None:
        super().reset()
        self.metric.reset()

    def persistent(self, mode: bool = False) -> None:
        super().persistent(mode)
        self.metric.persistent(mode)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.metric!r})"

