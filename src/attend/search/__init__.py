"""Greedy and beam search over any decoder that follows the Decoder contract."""

from attend.search.beam import BeamSearch
from attend.search.greedy import GreedySearch
from attend.search.result import SearchResult
from attend.search.state import reorder_state

__all__ = ["BeamSearch", "GreedySearch", "SearchResult", "reorder_state"]
