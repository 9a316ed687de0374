"""Text metrics: each reads the hypotheses and references of a ``Decoded`` batch; synchronised under DDP."""

from __future__ import annotations

import torch
from sacrebleu.metrics import CHRF
from torch import tensor
from torchmetrics import Metric
from torchmetrics import text as torchmetrics_text

from attend.metrics.base import Decoded


class BLEU(torchmetrics_text.SacreBLEUScore):
    """Corpus BLEU of sacreBLEU (13a tokenisation) on detokenised text, in percent."""

    headline = True  # a score of the output text: the progress bar may show it

    def __init__(self, tokenize: str = "13a", **kwargs) -> None:
        super().__init__(tokenize=tokenize, **kwargs)

    def update(self, decoded: Decoded) -> None:
        super().update(decoded.hypotheses, [[reference] for reference in decoded.references])

    def compute(self):
        return 100.0 * super().compute()


class ChrF(Metric):
    """chrF (Popović 2015) exactly as sacreBLEU computes it (character 6-grams, beta 2), in percent.

    The state is sacreBLEU's summed match statistics, so corpus chrF is right under DDP
    (statistics are summed over ranks); 0.1 s for 1,000 sentences here, against 5.5 s for torchmetrics' CHRFScore.
    """

    headline = True

    def __init__(self, char_order: int = 6, word_order: int = 0, beta: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scorer = CHRF(char_order=char_order, word_order=word_order, beta=beta)
        size = 3 * (char_order + word_order)  # hypothesis, reference and match counts per n-gram order
        self.add_state("stats", default=torch.zeros(size, dtype=torch.long), dist_reduce_fx="sum")

    # sacreBLEU's own statistics functions (private, so pyproject keeps sacrebleu below 3)
    def update(self, decoded: Decoded) -> None:
        segment_stats = self.scorer._extract_corpus_statistics(decoded.hypotheses, [list(decoded.references)])
        self.stats += torch.tensor(segment_stats, dtype=torch.long).sum(dim=0)

    def compute(self):
        score = self.scorer._compute_score_from_stats(self.stats.tolist()).score
        return torch.tensor(score, dtype=torch.float64)


class ExactMatch(Metric):
    """Share of outputs equal to their reference, in percent."""

    headline = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("matches", default=tensor(0.0), dist_reduce_fx="sum")
        self.add_state("count", default=tensor(0.0), dist_reduce_fx="sum")

    def update(self, decoded: Decoded) -> None:
        pairs = zip(decoded.hypotheses, decoded.references, strict=True)
        self.matches += sum(p.strip() == t.strip() for p, t in pairs)
        self.count += len(decoded.hypotheses)

    def compute(self):
        return 100.0 * self.matches / self.count.clamp(min=1.0)


class CharErrorRate(torchmetrics_text.CharErrorRate):
    """torchmetrics' character error rate (edits / reference characters, a fraction) of a ``Decoded`` batch."""

    headline = True

    def update(self, decoded: Decoded) -> None:
        super().update(decoded.hypotheses, decoded.references)


class WordErrorRate(torchmetrics_text.WordErrorRate):
    """torchmetrics' word error rate (edits / reference words, a fraction) of a ``Decoded`` batch."""

    headline = True

    def update(self, decoded: Decoded) -> None:
        super().update(decoded.hypotheses, decoded.references)
