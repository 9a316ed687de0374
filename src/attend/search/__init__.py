"""Greedy and beam search over any decoder that follows the Decoder contract, with an optional per-step recorder;
the scorers beam search weighs besides the decoder (CTC prefix scores, a word prior); CTC best path."""

from attend.search.beam import BeamSearch
from attend.search.ctc_greedy import ctc_best_path
from attend.search.ctc_prefix import CTCPrefixScorer, CTCPrefixScores
from attend.search.greedy import GreedySearch
from attend.search.recorder import SearchStep, StepRecorder
from attend.search.result import SearchResult
from attend.search.scorer import Scorer, ScorerState
from attend.search.state import reorder_state
from attend.search.word_prior import WordPrior

__all__ = [
    "BeamSearch",
    "CTCPrefixScorer",
    "CTCPrefixScores",
    "GreedySearch",
    "Scorer",
    "ScorerState",
    "SearchResult",
    "SearchStep",
    "StepRecorder",
    "WordPrior",
    "ctc_best_path",
    "reorder_state",
]
