"""Beam search, batched over batch x beam: no Python loop over sentences."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attend.memory import Memory
from attend.search.result import SearchResult, forbid, max_lengths
from attend.search.state import reorder_state


class BeamSearch:
    """Keep the ``beam_size`` best hypotheses of every sentence; rank finished ones with the
    length penalty of Wu et al. 2016 (GNMT), eq. 14: lp(Y) = ((5 + |Y|) / 6) ** alpha.

    A finished hypothesis stays in its beam and continues with padding at zero cost; once all beams
    of a sentence have ended, the sentence leaves the batch, so later steps compute only the rows
    still searched (its weights after its last step are zeros).
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
        active = torch.arange(batch, device=device)  # the sentences still searched, as rows of the input
        done: list[tuple[Tensor, Tensor, Tensor, Tensor]] = []  # (sentences, history, weights, scores)
        for t in range(int(limits.max())):
            logits, attended, state = decoder.step(prev, memory, state)  # (b*K, V), weights (b*K, 1, S)
            vocab = logits.size(-1)
            logp = forbid(torch.log_softmax(logits.float(), dim=-1), [pad_id, bos_id]).view(-1, k, vocab)
            logp = self._constrain(logp, finished, t + 1 >= limits, eos_id, pad_id)
            totals = logp.add_(scores.unsqueeze(-1)).view(logp.size(0), -1)  # (b, K*V)
            top_scores, top_index = totals.topk(k, dim=-1)  # (b, K)
            origin, token = top_index // vocab, top_index % vocab  # (b, K)
            flat_origin = (offsets + origin).view(-1)  # (b*K,)
            state = reorder_state(state, flat_origin)
            history = torch.cat([_gather_beams(history, origin), token.unsqueeze(-1)], dim=-1)
            step_weights = _step_weights(attended)
            step_weights = step_weights.view(-1, k, *step_weights.shape[1:])  # (b, K, 1, [H + 1,] S)
            if history_weights is not None:
                step_weights = torch.cat([history_weights, step_weights], dim=2)
            history_weights = _gather_beams(step_weights, origin)
            finished = finished.gather(1, origin) | (token == eos_id)
            scores, prev = top_scores, token.view(-1)
            ended = finished.all(dim=1)  # (b,): every beam of the sentence has ended
            if bool(ended.any()):  # the step's one host synchronisation, as before
                done.append((active[ended], history[ended], history_weights[ended], scores[ended]))
                keep = (~ended).nonzero().squeeze(1)  # (b',)
                if keep.numel() == 0:
                    break
                # drop ended sentences: later steps compute only the rows still searched
                rows = (keep.unsqueeze(1) * k + torch.arange(k, device=device)).view(-1)  # (b'*K,)
                memory, state, prev = memory.index_select(rows), reorder_state(state, rows), prev[rows]
                active, limits, scores, finished = active[keep], limits[keep], scores[keep], finished[keep]
                history, history_weights = history[keep], history_weights[keep]
                offsets = offsets[: keep.numel()]
        else:
            done.append((active, history, history_weights, scores))
        history, history_weights, scores = _in_input_order(done, batch, pad_id)
        return self._best(history, history_weights, scores, pad_id, eos_id, memory.grid, source_lengths)

    @staticmethod
    def _constrain(logp: Tensor, finished: Tensor, at_limit: Tensor, eos_id: int, pad_id: int) -> Tensor:
        """Finished beams may only add padding (at no cost); beams at the length limit must end.

        In place, one pass over logp (b, K, V): no full-size temporaries (the step's largest tensor).
        """
        limited = at_limit.view(-1, 1).expand_as(finished)  # (b, K)
        eos = logp[..., eos_id].clone()  # (b, K)
        logp.masked_fill_((limited | finished).unsqueeze(-1), -torch.inf)
        logp[..., eos_id] = torch.where(limited & ~finished, eos, logp[..., eos_id])
        logp[..., pad_id] = torch.where(finished, torch.zeros_like(eos), logp[..., pad_id])
        return logp

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


def _in_input_order(done: list, batch: int, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The ended sentences' histories (B, K, T), weights (B, K, T, ...) and scores (B, K) in input order,
    padded to the longest (tokens with padding, weights with zeros)."""
    steps = max(part[1].size(-1) for part in done)
    sentences = torch.cat([part[0] for part in done])  # (B,)
    history = torch.cat([F.pad(part[1], (0, steps - part[1].size(-1)), value=pad_id) for part in done])
    weights = torch.cat([_pad_steps(part[2], steps) for part in done])
    scores = torch.cat([part[3] for part in done])
    order = torch.empty_like(sentences)
    order[sentences] = torch.arange(batch, device=sentences.device)  # where each input sentence landed
    return history[order], weights[order], scores[order]


def _pad_steps(weights: Tensor, steps: int) -> Tensor:
    """weights (b, K, T, ...) with zero steps appended up to ``steps``."""
    missing = steps - weights.size(2)
    if not missing:
        return weights
    return torch.cat([weights, weights.new_zeros(*weights.shape[:2], missing, *weights.shape[3:])], dim=2)


def _gather_beams(tensor: Tensor, origin: Tensor) -> Tensor:
    """Rows of each sentence's beams picked by ``origin`` (B, K) from tensor (B, K, ...)."""
    index = origin.view(*origin.shape, *([1] * (tensor.dim() - 2))).expand(-1, -1, *tensor.shape[2:])
    return tensor.gather(1, index)
