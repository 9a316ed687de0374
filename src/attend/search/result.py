"""What a search returns."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class SearchResult:
    tokens: Tensor  # (B, T) output ids, the end token included, padded after it
    lengths: Tensor  # (B,) number of output ids, the end token included
    weights: Tensor  # (B, T, S) attention weights of the chosen hypothesis
    scores: Tensor  # (B,) log-probability (length-normalised for beam search)
    eos_id: int
    grid: tuple[int, int] | None = None  # the memory's (H, W) when it is an image grid (S == H*W)
    source_lengths: Tensor | None = None  # (B,) valid memory positions of each row (plots trim padding)
    head_weights: Tensor | None = None  # (B, H, T, S) per-head weights of multi-head attention

    def sequences(self) -> list[list[int]]:
        """Output ids of each sentence, without the end token."""
        out = []
        for row, length in zip(self.tokens.tolist(), self.lengths.tolist(), strict=True):
            row = row[:length]
            out.append(row[:-1] if row and row[-1] == self.eos_id else row)
        return out


def max_lengths(source_lengths: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Per-sentence output limit a * |source| + b (at least one step)."""
    return (max_len_a * source_lengths.float() + max_len_b).long().clamp(min=1)  # (B,)


def decoder_log_probs(logits: Tensor, pad_id: int, bos_id: int) -> Tensor:
    """The decoder's log-probabilities of the next token (N, V) in float32, padding and the start token forbidden."""
    return forbid(torch.log_softmax(logits.float(), dim=-1), [pad_id, bos_id])


def forbid(logp: Tensor, token_ids: list[int]) -> Tensor:
    """Set the log-probability of tokens that must never be produced (padding, start) to -inf."""
    logp[..., token_ids] = -torch.inf
    return logp
