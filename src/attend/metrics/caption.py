"""Captioning metrics over several references per image: corpus BLEU-1..4 and CIDEr-D."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from pycocoevalcap.cider.cider_scorer import CiderScorer
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat
from torchmetrics.utilities.distributed import gather_all_tensors

from attend.caption_tokens import caption_tokens
from attend.metrics.base import Decoded


def _reference_lists(target: list) -> list[list[str]]:
    """Each example's references as a list (a single string is one reference)."""
    return [[refs] if isinstance(refs, str) else list(refs) for refs in target]


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


class CaptionBLEU(Metric):
    """Corpus BLEU-n (Papineni et al. 2002) over all references, in percent.

    Clipped n-gram matches against the most generous reference, brevity penalty from the
    closest reference length (as sacreBLEU and the COCO evaluation do), uniform weights over
    orders 1..n, no smoothing. The state is summed counts, so it is exact under DDP.
    """

    higher_is_better = True
    headline = True  # a score of the output text: the progress bar may show it

    def __init__(self, n: int = 4, **kwargs) -> None:
        super().__init__(**kwargs)
        self.n = n
        self.add_state("matches", default=torch.zeros(n, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("totals", default=torch.zeros(n, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("hyp_len", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("ref_len", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, decoded: Decoded) -> None:
        matches, totals = [0] * self.n, [0] * self.n
        hyp_len = ref_len = 0
        for hypothesis, references in zip(decoded.hypotheses, _reference_lists(decoded.references), strict=True):
            hyp = caption_tokens(hypothesis)
            refs = [caption_tokens(r) for r in references]
            for order in range(1, self.n + 1):
                counts = _ngrams(hyp, order)
                best = Counter()
                for ref in refs:
                    best |= _ngrams(ref, order)  # element-wise max
                matches[order - 1] += sum(min(c, best[g]) for g, c in counts.items())
                totals[order - 1] += max(len(hyp) - order + 1, 0)
            hyp_len += len(hyp)
            ref_len += min((len(r) for r in refs), key=lambda length: (abs(length - len(hyp)), length))
        self.matches += torch.tensor(matches, dtype=torch.long, device=self.matches.device)
        self.totals += torch.tensor(totals, dtype=torch.long, device=self.totals.device)
        self.hyp_len += hyp_len
        self.ref_len += ref_len

    def compute(self) -> torch.Tensor:
        matches, totals = self.matches.tolist(), self.totals.tolist()
        if min(matches) == 0 or min(totals) == 0:
            return torch.tensor(0.0, dtype=torch.float64)
        log_precision = sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / self.n
        hyp_len, ref_len = int(self.hyp_len), int(self.ref_len)
        brevity = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / max(hyp_len, 1))
        return torch.tensor(100.0 * brevity * math.exp(log_precision), dtype=torch.float64)


class CIDErD(Metric):
    """CIDEr-D (Vedantam et al. 2015) by pycocoevalcap's scorer on ``caption_tokens``, times 100.

    Document frequencies come from the evaluated set's references, so the score is corpus-level:
    each rank keeps its (hypothesis, references) as UTF-8 bytes, DDP gathers them (however many
    each rank has, none included), and the scorer runs once on all of them. No record: 0.
    """

    higher_is_better = True
    headline = True

    def __init__(self, sigma: float = 6.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sigma = sigma
        self.add_state("records", default=[], dist_reduce_fx="cat")

    def update(self, decoded: Decoded) -> None:
        for hypothesis, references in zip(decoded.hypotheses, _reference_lists(decoded.references), strict=True):
            data = json.dumps([hypothesis, references]).encode("utf-8") + b"\0"  # JSON never holds a raw NUL
            self.records.append(torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device))

    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any = None) -> None:
        """Gather the records; a rank without any sends no bytes as uint8, the others' dtype (torchmetrics' own
        stand-in for an empty list is float32, which the gather cannot join with uint8: it fails or hangs)."""
        if isinstance(self.records, list) and not self.records:
            self.records = [torch.empty(0, dtype=torch.uint8, device=self.device)]  # sync() restores the local state
        super()._sync_dist(dist_sync_fn, process_group)

    def compute(self) -> torch.Tensor:
        records = self.records  # a list of byte tensors here; after DDP's sync one tensor of all ranks' bytes
        if isinstance(records, list):
            records = dim_zero_cat(records) if records else torch.empty(0, dtype=torch.uint8)
        data = records.cpu().numpy().tobytes()
        if not data:  # no record on any rank (the scorer cannot score an empty set)
            return torch.tensor(0.0, dtype=torch.float64)
        scorer = CiderScorer(n=4, sigma=self.sigma)
        for record in data.split(b"\0")[:-1]:
            hypothesis, references = json.loads(record.decode("utf-8"))
            scorer += (" ".join(caption_tokens(hypothesis)), [" ".join(caption_tokens(r)) for r in references])
        score, _ = scorer.compute_score()
        return torch.tensor(100.0 * float(score), dtype=torch.float64)
