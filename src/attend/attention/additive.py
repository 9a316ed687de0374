"""Additive ("concat", MLP) attention."""

from __future__ import annotations

from torch import Tensor, nn

from attend.attention.base import Attention
from attend.attention.energy import additive_energies
from attend.memory import Memory


class AdditiveAttention(Attention):
    """Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align and
    Translate", eq. (6) of appendix A.1.2: e_ij = v^T tanh(W s_{i-1} + U h_j).

    U h_j does not depend on the decoder step, so ``prepare`` computes it once per source. The
    (B, T, S, A) hidden tensor is chunked above ``max_elements`` (long audio memories).
    """

    def __init__(self, query_dim: int, value_dim: int, hidden_dim: int = 256, max_elements: int = 2**25) -> None:
        super().__init__(query_dim, value_dim)
        self.max_elements = max_elements
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W
        self.key_proj = nn.Linear(value_dim, hidden_dim, bias=True)  # U (the bias is b of the MLP)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def prepare(self, memory: Memory) -> Memory:
        return memory.replace(keys=self.key_proj(memory.values))  # (B, S, A)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        q = self.query_proj(query)  # (B, T, A)
        return additive_energies(q, memory.keys, self.v, self.max_elements)  # (B, T, S)
