"""Decoding speed: batched greedy and beam search (attend.search) against a loop over single sentences."""

from __future__ import annotations

from collections.abc import Callable

import torch

from attend.model import Seq2Seq
from benchmarks.timing import Timer, to_device


def decode(model: Seq2Seq, batch: dict, search: Callable) -> list[list[int]]:
    """The best hypothesis (token ids) of every sentence of a batch (``Seq2Seq.decode``: a joint CTC/attention
    search gets the CTC head's log-probabilities there)."""
    with torch.autocast(batch["src"].device.type, dtype=torch.bfloat16, enabled=batch["src"].is_cuda):
        return model.decode(batch, search).result.sequences()


@torch.no_grad()
def compare_decoding(
    model: Seq2Seq, batches: list[list[dict]], collate: Callable, searches: dict[str, Callable], device: torch.device
) -> dict[str, dict]:
    """For each search: sentences per second batched and one sentence at a time, and the fraction of
    sentences whose best hypothesis is the same. Batched and single decoding alternate batch by batch."""
    model.eval()
    results = {}
    for name, search in searches.items():
        timer = Timer(device)
        same = sentences = 0
        for examples in batches:
            batch = to_device(collate(examples), device)
            start = timer.mark()
            batched = decode(model, batch, search)
            timer.interval("batched", start, timer.mark())
            singles = []
            start = timer.mark()
            for example in examples:
                singles += decode(model, to_device(collate([example]), device), search)
            timer.interval("single", start, timer.mark())
            same += sum(a == b for a, b in zip(batched, singles, strict=True))
            sentences += len(examples)
        batched_s, single_s = sum(timer.seconds("batched")), sum(timer.seconds("single"))
        results[name] = {
            "sentences": sentences,
            "batched_sentences_per_s": sentences / batched_s,
            "single_sentences_per_s": sentences / single_s,
            "speedup": single_s / batched_s,
            "same_best_fraction": same / sentences,
        }
    return results
