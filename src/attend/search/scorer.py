"""What a named term of beam search's score provides (ESPnet's ScorerInterface): the CTC prefix scores, and room for
a language model or a length bonus, each added with its weight beside the attention decoder's log-probabilities."""

from __future__ import annotations

from abc import ABC, abstractmethod

from torch import Tensor

from attend.memory import Memory


class ScorerState(ABC):
    """A scorer's state in one search: one row per live hypothesis (b*K rows, K per sentence still searched)."""

    @abstractmethod
    def gains(self, candidates: Tensor) -> Tensor:
        """How much each hypothesis's score rises (N, C) when it is extended by each of its candidate tokens (N, C);
        -inf forbids the token. The end token's gain completes the hypothesis."""

    def advance(self, rows: Tensor, tokens: Tensor, keep: Tensor | None) -> None:
        """Make hypotheses ``rows`` (N',) extended by ``tokens`` (N',) the live ones; ``keep`` (b',): the sentences
        still searched, K rows each (all if None)."""
        return None  # a scorer without state has nothing to move


class Scorer(ABC):
    """A term of beam search's score, by the name the search gives it: the search adds weight x ``gains`` of the
    candidate tokens to the decoder's weighted log-probabilities.

    ``needs`` names the model output it reads (``ctc_log_probs``), or None: ``Seq2Seq.decode`` passes a search the
    outputs its scorers need (the search's ``needs``), so the model asks no search what it is. ``partial``: it scores
    only the pre-beam (the tokens the decoder finds likeliest for a hypothesis, and the end token), for a scorer whose
    cost grows with the candidates (CTC prefix scores); otherwise every token. ``rises``: a gain may be above 0 (a
    length bonus), so a hypothesis's score may still rise: the search then runs each sentence to its length limit
    instead of stopping once no live hypothesis can beat its finished ones (log-probabilities, CTC's too, only fall).
    """

    needs: str | None = None
    partial: bool = False
    rises: bool = False

    def bind(self, tokenizer) -> None:
        """Read the target vocabulary before a search (``Seq2Seq.decode`` calls it, each time; a scorer that reads
        tokens as text, a word prior, maps ids to characters here once). Most scorers need nothing."""
        return None

    @abstractmethod
    def start(
        self, given: Tensor | None, memory: Memory, beam_size: int, bos_id: int, eos_id: int, pad_id: int
    ) -> ScorerState:
        """Its state for a search of the B sentences of ``memory`` (prepared, not tiled): B*K rows, each the empty
        hypothesis (the start token alone). ``given``: the model output ``needs`` names, None when the model has
        none."""
