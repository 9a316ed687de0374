"""Beam search, batched over batch x beam: no Python loop over sentences."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from attend.memory import Memory
from attend.search.ctc_prefix import CTCPrefixScorer
from attend.search.pool import FinishedPool, in_input_order
from attend.search.recorder import SearchStep, StepRecorder
from attend.search.result import SearchResult, decoder_log_probs, max_lengths
from attend.search.scorer import Scorer, ScorerState
from attend.search.state import reorder_state


@dataclass
class _Live:
    """The K live (unfinished) hypotheses of each of the b sentences still searched."""

    active: Tensor  # (b,) the sentences, as rows of the input
    limits: Tensor  # (b,) output limit, the end token included
    min_tokens: Tensor  # (b,) tokens required before the end token
    scores: Tensor  # (b, K) log-probability; -inf for an empty beam
    history: Tensor  # (b, K, t) tokens
    weights: Tensor | None  # (b, K, t, S), or (b, K, t, H + 1, S) with each head's weights after the mean
    memory: Memory  # (b*K, ...)
    state: Any  # the decoder's state, b*K rows
    prev: Tensor  # (b*K,) last tokens
    scorers: dict[str, ScorerState] = field(default_factory=dict)  # the states of the scorers that count, b*K rows


class BeamSearch:
    """Beam search with the length penalty of Wu et al. 2016 (GNMT), eq. 14: lp(Y) = ((5 + |Y|) / 6) ** alpha.

    Every step takes the 2K best expansions of a sentence's K live hypotheses. Those that end (when among
    the K best, as in fairseq, so beam 1 is greedy search) enter a pool of finished hypotheses, scored
    log P(Y) / lp(|Y|) as they end; the K best that do not end stay live. A sentence is done when its pool
    holds K hypotheses and no live one can still beat the worst of them, or at its length limit, where every
    live hypothesis must end. Done sentences leave the batch, so later steps compute only the rows still
    searched. The result is the pool's best (its weights after its end token are zeros).

    Every score is a named scorer's with a weight (``weights``; ESPnet's ``BeamSearch(scorers, weights)``): a token c
    extends hypothesis h by weights["decoder"] log p_att(c | h) + the sum of weights[name] x the gain of each scorer
    (``Scorer``). ``ctc_weight`` lambda gives the ``ctc`` scorer (``CTCPrefixScorer``) and the decoder 1 - lambda:
    joint CTC/attention decoding (Watanabe et al. 2017, as ESPnet), a token's score (1 - lambda) log p_att(c | h) +
    lambda (log psi(h + c) - log psi(h)), psi the CTC prefix probability, so a hypothesis scores (1 - lambda)
    log P_att(Y) + lambda log P_ctc(Y) when it ends. ``scorers`` adds others (a language model, a length bonus), each
    with its weight in ``weights``. A scorer of weight 0 is not there: the search neither starts nor calls it, and
    with none the search is the attention decoder's alone. With a partial scorer (CTC) only the ceil(1.5 K) tokens
    the attention finds likeliest for a hypothesis, and the end token, get a score (the others -inf), as SpeechBrain
    and ESPnet's pre-beam do: CTC scores cost frames x candidates each. ``needs``: the model outputs the scorers read.
    """

    def __init__(
        self,
        beam_size: int = 5,
        length_penalty: float = 0.6,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        min_len_ratio: float = 0.0,
        ctc_weight: float = 0.0,
        scorers: Mapping[str, Scorer] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        if beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {beam_size}")
        if not min_len_ratio >= 0.0:
            raise ValueError(f"min_len_ratio must be >= 0 (output tokens per source position), got {min_len_ratio}")
        if not 0.0 <= ctc_weight <= 1.0:
            raise ValueError(f"ctc_weight is a mixing weight in [0, 1] (decoding.ctc_weight), got {ctc_weight}")
        added, added_weights = dict(scorers or {}), dict(weights or {})
        if set(added) != set(added_weights) or {"decoder", "ctc"} & set(added):
            raise ValueError(f"scorers {sorted(added)} and weights {sorted(added_weights)} must name the same scorers, "
                             "and neither decoder nor ctc: ctc_weight sets those two")
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.max_len_a = max_len_a
        self.max_len_b = max_len_b
        self.min_len_ratio = min_len_ratio
        self.weights = {"decoder": 1.0 - ctc_weight, "ctc": ctc_weight, **added_weights}
        every = {"ctc": CTCPrefixScorer(), **added}
        self.scorers = {name: scorer for name, scorer in every.items() if self.weights[name] != 0}  # those that count
        # a sentence stops early (_bound) only while scores can only fall: positive weights of gains never above 0
        self.scores_fall = all(self.weights[name] > 0 and not scorer.rises for name, scorer in self.scorers.items())
        self.pre_beam = math.ceil(1.5 * beam_size)  # tokens per hypothesis that a partial scorer scores

    def __str__(self) -> str:
        return f"beam search (K={self.beam_size})"

    def bind(self, tokenizer) -> None:
        """Give the scorers that count the target vocabulary (``Scorer.bind``): ``Seq2Seq.decode`` calls it."""
        for scorer in self.scorers.values():
            scorer.bind(tokenizer)

    @property
    def needs(self) -> tuple[str, ...]:
        """The model outputs its scorers read, by name (``ctc_log_probs`` with CTC): what ``__call__`` is given."""
        return tuple(scorer.needs for scorer in self.scorers.values() if scorer.needs is not None)

    def penalty(self, lengths: Tensor) -> Tensor:
        """lp(|Y|) of GNMT eq. 14 for lengths that count the end token."""
        return ((5.0 + lengths.float()) / 6.0) ** self.length_penalty

    @torch.no_grad()
    def __call__(
        self, decoder, memory: Memory, bos_id: int, eos_id: int, pad_id: int, recorder: StepRecorder | None = None,
        **given: Tensor,
    ) -> SearchResult:
        """The best finished hypothesis of every sentence, by length-normalised score. ``given``: the model outputs
        its scorers read (``needs``) by name, e.g. ctc_log_probs (B, S, V), the CTC head's log-probabilities over the
        memory's frames (blank = pad id). ``recorder`` (optional) receives each step's live hypotheses, the decoder's
        log-probabilities and the attention weights (``attend.search.recorder``)."""
        k = self.beam_size
        memory = decoder.prepare(memory)  # keys once per source, then tiled
        live = self._start(decoder, memory, bos_id)
        live.scorers = {
            name: scorer.start(given.get(scorer.needs) if scorer.needs else None, memory, k, bos_id, eos_id, pad_id)
            for name, scorer in self.scorers.items()
        }
        batch, source_lengths = live.scores.size(0), memory.lengths  # (B,)
        pool: FinishedPool | None = None
        done: list[tuple[Tensor, Tensor, Tensor, Tensor]] = []  # (sentences, tokens, weights, scores)
        for t in range(int(live.limits.max())):
            logits, attended, live.state = decoder.step(live.prev, live.memory, live.state)  # (b*K, V)
            vocab = logits.size(-1)
            if recorder is not None:
                recorder(self._step(t, live, decoder_log_probs(logits, pad_id, bos_id), attended))
            totals = self._totals(logits, live, t, bos_id, eos_id, pad_id)  # (b, K*V)
            candidates, index = totals.topk(2 * k, dim=-1)  # (b, 2K), best first
            origin, token = index // vocab, index % vocab  # (b, 2K)
            step_weights = _step_weights(attended)
            step_weights = step_weights.view(-1, k, *step_weights.shape[1:])  # (b, K, 1, [H + 1,] S)
            if live.weights is not None:
                step_weights = torch.cat([live.weights, step_weights], dim=2)  # (b, K, t+1, ...)
            if pool is None:
                pool = FinishedPool(torch.full_like(live.scores, -torch.inf), step_weights)
            ends = token == eos_id  # (b, 2K)
            ranked = ends & candidates.isfinite() & (torch.arange(2 * k, device=ends.device) < k)  # (b, 2K)
            normalised = torch.where(ranked, candidates / ((6.0 + t) / 6.0) ** self.length_penalty, -torch.inf)
            pool_scores, pick = pool.rank(normalised)  # (b, K)
            scores, beam = candidates.masked_fill(ends, -torch.inf).topk(k, dim=-1)  # (b, K) the live ones
            ended = pool_scores[:, -1] >= self._bound(scores[:, 0], live.limits, t)  # (b,)
            changed = (pick >= k) & pool_scores.isfinite()  # (b, K)
            any_changed, any_ended = torch.stack([changed.any(), ended.any()]).tolist()  # the step's one sync
            if any_changed:
                pool.update(pool_scores, pick, origin, live.history, step_weights, eos_id, pad_id)
            keep = None
            if any_ended:
                done.append((live.active[ended], *pool.best(ended)))
                keep = (~ended).nonzero().squeeze(1)  # (b',)
                if keep.numel() == 0:
                    break
                pool.select(keep)
            self._advance(live, keep, origin.gather(1, beam), token.gather(1, beam), scores, step_weights)
        tokens, weights, scores = in_input_order(done, batch, pad_id)
        return self._result(tokens, weights, scores, pad_id, eos_id, memory.grid, source_lengths)

    def _start(self, decoder, memory: Memory, bos_id: int) -> _Live:
        """K copies of every sentence, only the first of them live (they would expand identically)."""
        k, batch, device = self.beam_size, memory.values.size(0), memory.values.device
        limits = max_lengths(memory.lengths, self.max_len_a, self.max_len_b)  # (B,)
        tiled = memory.repeat_interleave(k)  # (B*K, ...)
        scores = torch.full((batch, k), -torch.inf, device=device)
        scores[:, 0] = 0.0
        return _Live(
            active=torch.arange(batch, device=device),
            limits=limits,
            min_tokens=(self.min_len_ratio * memory.lengths.float()).ceil().long(),  # (B,)
            scores=scores,  # (B, K)
            history=torch.empty(batch, k, 0, dtype=torch.long, device=device),
            weights=None,
            memory=tiled,
            state=decoder.init_state(tiled),
            prev=torch.full((batch * k,), bos_id, dtype=torch.long, device=device),
        )

    def _totals(self, logits: Tensor, live: _Live, t: int, bos_id: int, eos_id: int, pad_id: int) -> Tensor:
        """Score (b, K*V) of every expansion: no padding or start token; no end token before the minimum
        length; only the end token at the length limit (which wins over the minimum); with scorers, the weighted sum."""
        logp = decoder_log_probs(logits, pad_id, bos_id)
        logp = logp.view(-1, self.beam_size, logp.size(-1))  # (b, K, V)
        at_limit = (t + 1 >= live.limits).view(-1, 1)  # (b, 1)
        too_short = (t < live.min_tokens).view(-1, 1) & ~at_limit  # (b, 1)
        eos = logp[..., eos_id].masked_fill(too_short, -torch.inf)  # (b, K)
        logp.masked_fill_(at_limit.unsqueeze(-1), -torch.inf)  # in place: the step's largest tensor
        logp[..., eos_id] = eos
        if live.scorers:
            logp = self._weighted(logp, live.scorers, eos_id)
        return logp.add_(live.scores.unsqueeze(-1)).view(logp.size(0), -1)

    def _weighted(self, logp: Tensor, states: dict[str, ScorerState], eos_id: int) -> Tensor:
        """weights["decoder"] log p_att + the sum of weights[name] x each scorer's gains (b, K, V). With a partial
        scorer (CTC) only for the pre-beam, the ceil(1.5 K) tokens likeliest by attention of each hypothesis, and
        for the end token, which is always scored, as in ESPnet: a hypothesis can end even when the attention ranks
        the end token low (for CTC a look-up, no recursion); -inf for every other token."""
        flat = logp.view(-1, logp.size(-1))  # (b*K, V)
        if any(self.scorers[name].partial for name in states):
            attention, candidates = flat.topk(min(self.pre_beam, flat.size(-1)), dim=-1)  # (b*K, C)
            parts = [candidates, torch.full_like(candidates[:, :1], eos_id)]  # the pre-beam, then the end token
            attention = torch.cat([attention, flat[:, eos_id, None]], dim=1)  # (b*K, C + 1)
        else:  # every token is a candidate
            attention, parts = flat, [torch.arange(flat.size(-1), device=flat.device).expand_as(flat)]
        total = self.weights["decoder"] * attention  # (b*K, C + 1), or (b*K, V)
        for name, state in states.items():
            total = total + self.weights[name] * torch.cat([state.gains(part) for part in parts], dim=1)
        total = total.masked_fill(attention.isinf(), -torch.inf)  # a decoder weight 0: 0 * -inf would be NaN
        if len(parts) == 1:
            return total.view_as(logp)
        # the end token may be twice among the candidates, with the same score: either write is right
        return torch.full_like(flat, -torch.inf).scatter_(1, torch.cat(parts, dim=1), total).view_as(logp)

    def _step(self, t: int, live: _Live, logp: Tensor, attended) -> SearchStep:
        """Step t as the recorder sees it: the live hypotheses (b, K) before they are extended."""
        k, heads = self.beam_size, attended.head_weights  # (b*K, H, 1, S) or None
        return SearchStep(
            t=t,
            sentences=live.active,
            history=live.history,
            scores=live.scores,
            log_probs=logp.view(-1, k, logp.size(-1)),  # (b, K, V)
            weights=attended.weights.view(-1, k, attended.weights.size(-1)),  # (b, K, S)
            head_weights=None if heads is None else heads.view(-1, k, *heads.shape[1:2], heads.size(-1)),
        )

    def _bound(self, scores: Tensor, limits: Tensor, t: int) -> Tensor:
        """The best normalised score (b,) a live hypothesis of log-probability ``scores`` can still reach:
        log-probabilities only fall, so its score over the largest penalty of a length it can end at. With a score
        that may rise (a length bonus), +inf for a sentence with a live hypothesis: only its length limit ends it."""
        if not self.scores_fall:
            return scores.masked_fill(scores.isfinite(), torch.inf)
        return scores / self.penalty(limits).clamp(min=((6.0 + t) / 6.0) ** self.length_penalty)

    def _advance(
        self, live: _Live, keep: Tensor | None, origin: Tensor, token: Tensor, scores: Tensor, weights: Tensor
    ) -> None:
        """Make the chosen expansions (b, K) the live beams, keeping only sentences ``keep`` (all if None)."""
        k = self.beam_size
        if keep is not None:  # drop done sentences: later steps compute only the rows still searched
            origin, token, scores = origin[keep], token[keep], scores[keep]
            tiled = (keep.unsqueeze(1) * k + torch.arange(k, device=keep.device)).view(-1)  # (b'*K,)
            live.memory = live.memory.index_select(tiled)
            live.active, live.limits, live.min_tokens = live.active[keep], live.limits[keep], live.min_tokens[keep]
        rows = (keep if keep is not None else torch.arange(origin.size(0), device=origin.device)).unsqueeze(1)
        live.state = reorder_state(live.state, (rows * k + origin).view(-1))  # (b'*K,) rows of the step's batch
        for state in live.scorers.values():
            state.advance((rows * k + origin).view(-1), token.view(-1), keep)
        live.history = torch.cat([live.history[rows, origin], token.unsqueeze(-1)], dim=-1)  # (b', K, t+1)
        live.weights = weights[rows, origin]  # (b', K, t+1, ...)
        live.scores, live.prev = scores, token.view(-1)

    @staticmethod
    def _result(
        tokens: Tensor, weights: Tensor, scores: Tensor, pad_id: int, eos_id: int, grid, source_lengths: Tensor
    ) -> SearchResult:
        """The chosen hypotheses (B, T) as a SearchResult, trimmed to the longest."""
        lengths = (tokens != pad_id).sum(dim=-1)  # (B,)
        steps = int(lengths.max())
        tokens, weights = tokens[:, :steps], weights[:, :steps]  # (B, T), (B, T, S) or (B, T, H + 1, S)
        heads = None if weights.dim() == 3 else weights[:, :, 1:].transpose(1, 2)  # (B, H, T, S)
        return SearchResult(
            tokens=tokens,
            lengths=lengths,
            weights=weights if heads is None else weights[:, :, 0],  # (B, T, S)
            head_weights=heads,
            scores=scores,
            eos_id=eos_id,
            grid=grid,
            source_lengths=source_lengths,
        )


def _step_weights(attended) -> Tensor:
    """A step's weights (B*K, 1, S), with the heads' (B*K, H, 1, S) as (B*K, 1, H + 1, S) after them."""
    if attended.head_weights is None:
        return attended.weights
    return torch.cat([attended.weights.unsqueeze(2), attended.head_weights.transpose(1, 2)], dim=2)
