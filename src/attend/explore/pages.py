"""The one call behind every explorer page (predict.py, the validation dashboard, the local server): decode a batch
with the model's search and a ``StepLog``, and give each example's page data."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from attend.explore.forced import forced_steps
from attend.explore.sources import page_source
from attend.explore.steps import StepLog, search_steps

if TYPE_CHECKING:
    from attend.metrics.base import Decoded


def explore_batch(model, datamodule, batch: dict, search, references: list[str | None] | None = None,
                  titles: list[str] | None = None) -> tuple[list[str], list[dict]]:
    """The batch decoded with ``search`` (predict.py's call, ``model.decode``, with a recorder) and the page data of
    each example: source, output, every step of the search and, for a row with a reference (``references``, or
    None), every step of teacher forcing on it; each page titled by ``titles`` (default "input N"). Returns
    (hypotheses, page data)."""
    decoded, pages = decode_and_explore(model, datamodule, batch, search, references, titles)
    return decoded.hypotheses, pages


@torch.no_grad()
def decode_and_explore(model, datamodule, batch: dict, search, references: list[str | None] | None = None,
                       titles: list[str] | None = None) -> tuple[Decoded, list[dict]]:
    """``explore_batch`` returning the whole decode (``Decoded``), for a caller that also draws from it."""
    memory = model.encode(batch)
    log = StepLog()
    decoded = model.decode(batch, search, memory=memory, recorder=log)
    tok = model.target_tokenizer
    pages = []
    for row, hypothesis in enumerate(decoded.hypotheses):
        reference = (references or [None] * len(decoded.hypotheses))[row]
        modes = {"search": search_steps(log, decoded.result, row, tok.tokens)}
        if reference:
            one = memory.index_select(torch.tensor([row], device=memory.values.device))
            modes["forced"] = forced_steps(model, one, reference)
        pages.append({
            "title": titles[row] if titles else f"input {row}",
            "input": str(batch["sources"][row]),
            "source": page_source(datamodule.readable_source(batch, row), decoded.result.grid),
            "output": hypothesis,
            "reference": reference,
            "search": str(search),  # "beam search (K=5)", "greedy search"
            "modes": modes,
        })
    return decoded, pages

