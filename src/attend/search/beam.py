"""Beam search, batched over batch x beam: no Python loop over sentences."""

from __future__ import annotations

import torch
from torch import Tensor

from attend.memory import Memory
from attend.search.result import SearchResult, forbid, max_lengths
from attend.search.state import reorder_state


class BeamSearch:
    """Keep the ``beam_size`` best hypotheses of every sentence; rank finished ones with the
    length penalty of Wu et al. 2016 (GNMT), eq. 14: lp(Y) = ((5 + |Y|) / 6) ** alpha.

    A finished hypothesis stays in its beam and continues with padding at zero cost.
    """

    def __init__(
        self, beam_size: int = 5, length_penalty: float = 0.6, max_len_a: float = 1.5, max_len_b: int = 10
    ) -> None:
        if beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {beam_size}")
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.max_len_a = max_len_a
        self.max_len_b = max_len_b

    def penalty(self, lengths: Tensor) -> Tensor:
        return ((5.0 + lengths.float()) / 6.0) ** self.length_penalty

    @torch.no_grad()
    def __call__(self, decoder, memory: Memory, bos_id: int, eos_id: int, pad_id: int) -> SearchResult:
        k = self.beam_size
        memory = decoder.prepare(memory)  # keys once per source, then tiled
        batch, device = memory.values.size(0), memory.values.device
        source_lengths = memory.lengths  # (B,)
        limits = max_lengths(source_lengths, self.max_len_a, self.max_len_b)  # (B,)
        memory = memory.repeat_interleave(k)  # (B*K, ...)
        state = decoder.init_state(memory)
        scores = torch.full((batch, k), -torch.inf, device=device)
        scores[:, 0] = 0.0  # all beams start identical: expand only the first
        finished = torch.zeros(batch, k, dtype=torch.bool, device=device)
        prev = torch.full((batch * k,), bos_id, dtype=torch.long, device=device)
        offsets = (torch.arange(batch, device=device) * k).unsqueeze(1)  # (B, 1)
        history = torch.empty(batch, k, 0, dtype=torch.long, device=device)
        history_weights = None  # (B, K, T, S), or (B, K, T, H + 1, S) with each head's weights after the mean
        for t in range(int(limits.max())):
            logits, attended, state = decoder.step(prev, memory, state)  # (B*K, V), weights (B*K, 1, S)
            vocab = logits.size(-1)
            logp = forbid(torch.log_softmax(logits.float(), dim=-1), [pad_id, bos_id]).view(batch, k, vocab)
            logp = self._constrain(logp, finished, t + 1 >= limits, eos_id, pad_id)
            top_scores, top_index = (scores.unsqueeze(-1) + logp).view(batch, -1).topk(k, dim=-1)  # (B, K)
            origin, token = top_index // vocab, top_index % vocab  # (B, K)
            flat_origin = (offsets + origin).view(-1)  # (B*K,)
            state = reorder_state(state, flat_origin)
            history = torch.cat([_gather_beams(history, origin), token.unsqueeze(-1)], dim=-1)
            step_weights = _step_weights(attended)
            step_weights = step_weights.view(batch, k, *step_weights.shape[1:])  # (B, K, 1, [H + 1,] S)
            if history_weights is not None:
                step_weights = torch.cat([history_weights, step_weights], dim=2)
            history_weights = _gather_beams(step_weights, origin)
            finished = finished.gather(1, origin) | (token == eos_id)
            scores, prev = top_scores, token.view(-1)
            if bool(finished.all()):
                break
        return self._best(history, history_weights, scores, pad_id, eos_id, memory.grid, source_lengths)

    @staticmethod
    def _constrain(logp: Tensor, finished: Tensor, at_limit: Tensor, eos_id: int, pad_id: int) -> Tensor:
        """Finished beams may only add padding (at no cost); beams at the length limit must end."""
        only_pad = torch.full_like(logp[:1, :1], -torch.inf)  # (1, 1, V)
        only_pad[..., pad_id] = 0.0
        only_eos = torch.full_like(only_pad, -torch.inf)
        only_eos[..., eos_id] = 0.0
        logp = torch.where(
            at_limit.view(-1, 1, 1),
            logp.gather(2, torch.full_like(logp[..., :1], eos_id, dtype=torch.long)) + only_eos,
            logp,
        )
        return torch.where(finished.unsqueeze(-1), only_pad, logp)

    def _best(
        self, history: Tensor, history_weights: Tensor, scores: Tensor, pad_id: int, eos_id: int, grid, source_lengths
    ):
        lengths = (history != pad_id).sum(dim=-1)  # (B, K)
        normalised = scores / self.penalty(lengths)
        best = normalised.argmax(dim=-1)  # (B,)
        rows = torch.arange(history.size(0), device=history.device)
        weights = history_weights[rows, best]  # (B, T, S) or (B, T, H + 1, S)
        heads = None if weights.dim() == 3 else weights[:, :, 1:].transpose(1, 2)  # (B, H, T, S)
        return SearchResult(
            tokens=history[rows, best],  # (B, T)
            lengths=lengths[rows, best],
            weights=weights if heads is None else weights[:, :, 0],  # (B, T, S)
            head_weights=heads,
            scores=normalised[rows, best],
            eos_id=eos_id,
            grid=grid,
            source_lengths=source_lengths,
        )


def _step_weights(attended) -> Tensor:
    """A step's weights (B*K, 1, S), with the heads' (B*K, H, 1, S) as (B*K, 1, H + 1, S) after them."""
    if attended.head_weights is None:
        return attended.weights
    return torch.cat([attended.weights.unsqueeze(2), attended.head_weights.transpose(1, 2)], dim=2)


def _gather_beams(tensor: Tensor, origin: Tensor) -> Tensor:
    """Rows of each sentence's beams picked by ``origin`` (B, K) from tensor (B, K, ...)."""
    index = origin.view(*origin.shape, *([1] * (tensor.dim() - 2))).expand(-1, -1, *tensor.shape[2:])
    return tensor.gather(1, index)
