"""Metrics: text metrics take ``update(hypotheses, references)``; attention metrics read the search."""

from torchmetrics.text import CharErrorRate, WordErrorRate

from attend.metrics.alignment import MonotoneAlignment
from attend.metrics.alignment_error import AlignmentError
from attend.metrics.base import AttentionMetric
from attend.metrics.caption import CaptionBLEU, CIDErD, caption_tokens
from attend.metrics.diagnostics import AttentionEntropy, CoverageDeficit
from attend.metrics.grounding import Grounding, box_cells
from attend.metrics.object_mass import ObjectArea, ObjectMass, cell_coverage
from attend.metrics.text import BLEU, ChrF, ExactMatch
from attend.metrics.unseen_only import UnseenOnly

__all__ = [
    "AlignmentError",
    "AttentionEntropy",
    "AttentionMetric",
    "BLEU",
    "CaptionBLEU",
    "CharErrorRate",
    "ChrF",
    "CIDErD",
    "CoverageDeficit",
    "ExactMatch",
    "Grounding",
    "MonotoneAlignment",
    "ObjectArea",
    "ObjectMass",
    "UnseenOnly",
    "WordErrorRate",
    "box_cells",
    "caption_tokens",
    "cell_coverage",
]
