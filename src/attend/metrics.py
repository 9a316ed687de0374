"""Text metrics with one signature, update(predictions, references), synchronised under DDP."""

from __future__ import annotations

from torch import tensor
from torchmetrics import Metric
from torchmetrics.text import CharErrorRate, CHRFScore, SacreBLEUScore, WordErrorRate


class BLEU(SacreBLEUScore):
    """Corpus BLEU of sacreBLEU (13a tokenisation) on detokenised text, in percent."""

    def __init__(self, tokenize: str = "13a", **kwargs) -> None:
        super().__init__(tokenize=tokenize, **kwargs)

    def update(self, preds: list[str], target: list[str]) -> None:
        super().update(preds, [[reference] for reference in target])

    def compute(self):
        return 100.0 * super().compute()


class ChrF(CHRFScore):
    """chrF (Popović 2015) with sacreBLEU's defaults (character 6-grams, no word n-grams), in percent."""

    def __init__(self, n_char_order: int = 6, n_word_order: int = 0, **kwargs) -> None:
        super().__init__(n_char_order=n_char_order, n_word_order=n_word_order, **kwargs)

    def update(self, preds: list[str], target: list[str]) -> None:
        super().update(preds, [[reference] for reference in target])

    def compute(self):
        return 100.0 * super().compute()


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


__all__ = ["BLEU", "ChrF", "ExactMatch", "CharErrorRate", "WordErrorRate"]
