"""Greedy search, batched: one decoder step per output position for the whole batch."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from attend.attention import AttentionOutput
from attend.memory import Memory
from attend.search.recorder import SearchStep, StepRecorder
from attend.search.result import SearchResult, decoder_log_probs, max_lengths


class GreedySearch:
    """Pick the most probable token at each step until every sentence has produced the end token.

    A sentence's attention weights after its end token are zeros (as beam search returns them). ``recorder``
    (optional) receives each step as the search sees it (``attend.search.recorder``).
    """

    needs: tuple[str, ...] = ()  # model outputs it reads besides the decoder's: none (it has no scorers)

    def __init__(self, max_len_a: float = 1.5, max_len_b: int = 10) -> None:
        self.max_len_a = max_len_a
        self.max_len_b = max_len_b

    def __str__(self) -> str:
        return "greedy search"

    @torch.no_grad()
    def __call__(
        self, decoder, memory: Memory, bos_id: int, eos_id: int, pad_id: int, recorder: StepRecorder | None = None
    ) -> SearchResult:
        memory = decoder.prepare(memory)
        state = decoder.init_state(memory)
        batch = memory.values.size(0)
        limits = max_lengths(memory.lengths, self.max_len_a, self.max_len_b)  # (B,)
        prev = torch.full((batch,), bos_id, dtype=torch.long, device=memory.values.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=prev.device)
        scores = torch.zeros(batch, device=prev.device)
        tokens: list[Tensor] = []
        attended: list = []
        for t in range(int(limits.max())):
            logits, step_attended, state = decoder.step(prev, memory, state)  # (B, V), weights (B, 1, S)
            logp = decoder_log_probs(logits, pad_id, bos_id)  # (B, V)
            if recorder is not None:
                recorder(_step(t, tokens, scores, logp, step_attended))
            best = logp.argmax(dim=-1)  # (B,)
            best = torch.where(t + 1 >= limits, torch.full_like(best, eos_id), best)
            best = torch.where(finished, torch.full_like(best, pad_id), best)
            step_scores = logp.gather(1, best.unsqueeze(1)).squeeze(1)
            scores = scores + torch.where(finished, torch.zeros_like(scores), step_scores)
            tokens.append(best)
            attended.append(_zero_after_end(step_attended, finished))
            finished = finished | (best == eos_id)
            if bool(finished.all()):
                break
            prev = best
        tokens_t = torch.stack(tokens, dim=1)  # (B, T)
        heads = [out.head_weights for out in attended]
        return SearchResult(
            tokens=tokens_t,
            lengths=(tokens_t != pad_id).sum(dim=1),
            weights=torch.cat([out.weights for out in attended], dim=1),  # (B, T, S)
            head_weights=None if heads[0] is None else torch.cat(heads, dim=2),  # (B, H, T, S)
            scores=scores,
            eos_id=eos_id,
            grid=memory.grid,
            source_lengths=memory.lengths,
        )


def _step(t: int, tokens: list[Tensor], scores: Tensor, logp: Tensor, attended: AttentionOutput) -> SearchStep:
    """Step t as a one-hypothesis beam: the tokens so far (B, 1, t), their scores (B, 1) and the step's outputs."""
    batch = logp.size(0)
    history = torch.stack(tokens, dim=1) if tokens else logp.new_empty(batch, 0, dtype=torch.long)  # (B, t)
    heads = attended.head_weights  # (B, H, 1, S) or None
    return SearchStep(
        t=t,
        sentences=torch.arange(batch, device=logp.device),
        history=history.unsqueeze(1),
        scores=scores.unsqueeze(1),
        log_probs=logp.unsqueeze(1),  # (B, 1, V)
        weights=attended.weights,  # (B, 1, S)
        head_weights=None if heads is None else heads.transpose(1, 2),  # (B, 1, H, S)
    )


def _zero_after_end(attended: AttentionOutput, finished: Tensor) -> AttentionOutput:
    """The step's attention with zero weights for sentences that had already ended (finished (B,))."""
    ended = finished.view(-1, 1, 1)  # (B, 1, 1)
    heads = attended.head_weights  # (B, H, 1, S) or None
    return replace(
        attended,
        weights=attended.weights.masked_fill(ended, 0.0),  # (B, 1, S)
        head_weights=None if heads is None else heads.masked_fill(ended.unsqueeze(1), 0.0),
    )
