"""Finished hypotheses of beam search, kept per sentence and batched (no Python loop over sentences)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


class FinishedPool:
    """The K best finished hypotheses of each sentence, best first, by length-normalised score.

    Slot j of sentence i holds tokens (the end token included, padded after it), the attention weights of
    each step (zeros after the end) and the score log P(Y) / lp(|Y|); empty slots score -inf.
    """

    def __init__(self, scores: Tensor, step_weights: Tensor) -> None:
        self.scores = scores  # (b, K), sorted, best first
        self.tokens = torch.empty(*scores.shape, 0, dtype=torch.long, device=scores.device)  # (b, K, T)
        self.weights = step_weights.new_zeros(*scores.shape, 0, *step_weights.shape[3:])  # (b, K, T, [H + 1,] S)

    def rank(self, normalised: Tensor) -> tuple[Tensor, Tensor]:
        """The K best of the pool and the step's candidates (b, 2K), -inf for those that do not end; with
        where each slot comes from (b, K): an old slot (< K) or candidate ``pick - K``."""
        merged = torch.cat([self.scores, normalised], dim=1)  # (b, 3K)
        return merged.topk(self.scores.size(1), dim=1)

    def update(
        self, scores: Tensor, pick: Tensor, origin: Tensor, history: Tensor, weights: Tensor, eos_id: int, pad_id: int
    ) -> None:
        """Take the ranking of ``rank``; a candidate ends live beam ``origin`` (b, 2K), whose tokens are
        history (b, K, t) and whose weights, this step's included, are weights (b, K, t + 1, ...)."""
        k, steps = scores.size(1), weights.size(2)
        rows = torch.arange(scores.size(0), device=scores.device).unsqueeze(1)  # (b, 1)
        new = pick >= k  # (b, K)
        beam = origin.gather(1, (pick - k).clamp(min=0))  # (b, K): the live beam a new slot ends
        old = pick.clamp(max=k - 1)  # (b, K)
        ended = torch.cat([history[rows, beam], torch.full_like(beam, eos_id).unsqueeze(-1)], dim=-1)  # (b, K, t+1)
        kept = F.pad(self.tokens[rows, old], (0, steps - self.tokens.size(2)), value=pad_id)  # (b, K, t+1)
        self.tokens = torch.where(new.unsqueeze(-1), ended, kept)
        fresh = weights[rows, beam]  # (b, K, t+1, ...)
        where_new = new.view(*new.shape, *([1] * (fresh.dim() - 2)))
        self.weights = torch.where(where_new, fresh, pad_steps(self.weights[rows, old], steps))
        self.scores = scores

    def best(self, sentences: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Tokens (n, T), weights (n, T, ...) and score (n,) of the best hypothesis of ``sentences``."""
        return self.tokens[sentences, 0], self.weights[sentences, 0], self.scores[sentences, 0]

    def select(self, sentences: Tensor) -> None:
        """Keep only the rows ``sentences`` (the sentences still searched)."""
        self.scores, self.tokens, self.weights = self.scores[sentences], self.tokens[sentences], self.weights[sentences]


def in_input_order(done: list, batch: int, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The ended sentences' tokens (B, T), weights (B, T, ...) and scores (B,) in input order from parts
    (sentences, tokens, weights, scores), padded to the longest (tokens with padding, weights with zeros)."""
    steps = max(part[1].size(1) for part in done)
    sentences = torch.cat([part[0] for part in done])  # (B,)
    tokens = torch.cat([F.pad(part[1], (0, steps - part[1].size(1)), value=pad_id) for part in done])
    weights = torch.cat([pad_steps(part[2], steps, dim=1) for part in done])
    scores = torch.cat([part[3] for part in done])
    order = torch.empty_like(sentences)
    order[sentences] = torch.arange(batch, device=sentences.device)  # where each input sentence landed
    return tokens[order], weights[order], scores[order]


def pad_steps(weights: Tensor, steps: int, dim: int = 2) -> Tensor:
    """weights with zero steps appended along ``dim`` up to ``steps``."""
    missing = steps - weights.size(dim)
    if not missing:
        return weights
    zeros = weights.new_zeros(*weights.shape[:dim], missing, *weights.shape[dim + 1 :])
    return torch.cat([weights, zeros], dim=dim)
