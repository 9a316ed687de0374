"""Greedy and beam search over any decoder that follows the Decoder contract; CTC prefix scores and best path."""

from attend.search.beam import BeamSearch
from attend.search.ctc_greedy import ctc_best_path
from attend.search.ctc_prefix import CTCPrefixScorer
from attend.search.greedy import GreedySearch
from attend.search.result import SearchResult
from attend.search.state import reorder_state

__all__ = ["BeamSearch", "CTCPrefixScorer", "GreedySearch", "SearchResult", "ctc_best_path", "reorder_state"]
