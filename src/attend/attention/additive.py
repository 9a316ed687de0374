"""Additive ("concat", MLP) attention."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.attention.base import Attention
from attend.memory import Memory


class AdditiveAttention(Attention):
    """Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align and
    Translate", eq. (6) of appendix A.1.2: e_ij = v^T tanh(W s_{i-1} + U h_j).

    U h_j does not depend on the decoder step, so ``prepare`` computes it once per source.
    """

    def __init__(self, query_dim: int, value_dim: int, hidden_dim: int = 256) -> None:
        super().__init__(query_dim, value_dim)
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W
        self.key_proj = nn.Linear(value_dim, hidden_dim, bias=True)  # U (the bias is b of the MLP)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def prepare(self, memory: Memory) -> Memory:
        return memory.replace(keys=self.key_proj(memory.values))  # (B, S, A)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        q = self.query_proj(query)  # (B, T, A)
        hidden = torch.tanh(q.unsqueeze(2) + memory.keys.unsqueeze(1))  # (B, T, S, A)
        return self.v(hidden).squeeze(-1)  # (B, T, S)
