"""Metrics that read attention weights rather than text."""

from __future__ import annotations

from torchmetrics import Metric

from attend.search import SearchResult


class AttentionMetric(Metric):
    """A metric over the attention of decoded outputs: ``update_from_search(batch, result, tokenizer)``.

    The model calls ``update(batch, result, tokenizer)`` (torchmetrics' wrapped update, which
    counts updates and clears the cached value) with the batch it decoded, the search's result
    (tokens, weights, grid) and the target tokenizer; text metrics get ``update(hypotheses, references)``.
    """

    def update_from_search(self, batch: dict, result: SearchResult, tokenizer) -> None:
        raise NotImplementedError

    def update(self, *args, **kwargs) -> None:  # torchmetrics wraps update; route to the one above
        self.update_from_search(*args, **kwargs)
