"""An optional per-step hook of the searches: what the search weighed at each output step, handed to a recorder
as it happens (the decoding explorer draws it). Without a recorder the search computes nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from torch import Tensor


@dataclass(frozen=True)
class SearchStep:
    """Output step ``t`` of a search, for the b sentences still searched and their K live hypotheses (K=1: greedy).

    Every tensor is the search's own (read-only: a recorder must not change them in place)."""

    t: int
    sentences: Tensor  # (b,) the sentences still searched, as rows of the input
    history: Tensor  # (b, K, t) the tokens of each live hypothesis before this step
    scores: Tensor  # (b, K) their scores, log-probabilities (beam: -inf for an empty slot)
    log_probs: Tensor  # (b, K, V) the decoder's log-probabilities of the next token, padding and start forbidden
    weights: Tensor  # (b, K, S) the attention weights of this step (the heads' mean for multi-head attention)
    head_weights: Tensor | None  # (b, K, H, S) each head's weights, or None


class StepRecorder(Protocol):
    """Receives every step of one search call, in order (``search(..., recorder=...)``)."""

    def __call__(self, step: SearchStep) -> None: ...
