"""Metrics, all ``update(decoded: Decoded)``: text metrics read the hypotheses and references, attention
metrics the batch and the search's result. Those that may headline the progress bar declare ``headline``."""

from attend.caption_tokens import caption_tokens
from attend.metrics.alignment import MonotoneAlignment
from attend.metrics.alignment_error import AlignmentError
from attend.metrics.base import Decoded
from attend.metrics.caption import CaptionBLEU, CIDErD
from attend.metrics.diagnostics import AttentionEntropy, CoverageDeficit
from attend.metrics.grounding import Grounding, box_cells
from attend.metrics.object_mass import ObjectArea, ObjectMass, cell_coverage
from attend.metrics.text import BLEU, CharErrorRate, ChrF, ExactMatch, WordErrorRate
from attend.metrics.unseen_only import UnseenOnly

__all__ = [
    "AlignmentError",
    "AttentionEntropy",
    "BLEU",
    "CaptionBLEU",
    "CharErrorRate",
    "ChrF",
    "CIDErD",
    "CoverageDeficit",
    "Decoded",
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
