"""General (bilinear) attention."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.attention.base import Attention
from attend.memory import Memory


class GeneralAttention(Attention):
    """Luong et al. 2015, "Effective Approaches to Attention-based Neural Machine Translation",
    eq. (8) "general": score(h_t, h_s) = h_t^T W_a h_s.

    W_a h_s does not depend on the decoder step, so ``prepare`` computes keys = values W_a^T once
    per source and ``score`` is a plain dot product with the query.
    """

    def __init__(self, query_dim: int, value_dim: int) -> None:
        super().__init__(query_dim, value_dim)
        self.W_a = nn.Linear(value_dim, query_dim, bias=False)  # weight (Dq, Dv)

    def prepare(self, memory: Memory) -> Memory:
        return memory.replace(keys=self.W_a(memory.values))  # (B, S, Dq)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        return torch.bmm(query, memory.keys.transpose(1, 2))  # (B, T, S)
