"""Multi-head attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attend.attention.base import Attention, AttentionOutput, require_prepared
from attend.memory import Memory


class MultiHeadAttention(Attention):
    """Vaswani et al. 2017, "Attention Is All You Need", sec. 3.2.2:
    MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V),
    each head the scaled dot product of eq. (1) with d_k = attn_dim / num_heads.

    ``prepare`` projects keys and values once per source into ``memory.keys`` and
    ``memory.projected_values``, both (B, H, S, d_k). ``score`` returns per-head energies, so the
    shared ``forward`` gives head-averaged ``weights`` (B, T, S) and ``head_weights`` (B, H, T, S).
    The key projection has no bias: it would add the same q.b to every position of a query,
    which the softmax ignores (its gradient is zero).
    """

    def __init__(
        self,
        query_dim: int,
        value_dim: int,
        num_heads: int = 4,
        attn_dim: int | None = None,
        out_dim: int | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__(query_dim, value_dim)
        attn_dim = query_dim if attn_dim is None else attn_dim
        if attn_dim % num_heads != 0:
            raise ValueError(
                f"attention=multihead needs num_heads to divide attn_dim, got num_heads={num_heads} "
                f"and attn_dim={attn_dim} (attn_dim: null means query_dim={query_dim})"
            )
        self.num_heads = num_heads
        self.head_dim = attn_dim // num_heads
        self._output_dim = value_dim if out_dim is None else out_dim
        self.query_proj = nn.Linear(query_dim, attn_dim)  # W^Q
        self.key_proj = nn.Linear(value_dim, attn_dim, bias=False)  # W^K
        self.value_proj = nn.Linear(value_dim, attn_dim)  # W^V
        self.out_proj = nn.Linear(attn_dim, self._output_dim)  # W^O
        self.dropout = nn.Dropout(dropout)

    @property
    def output_dim(self) -> int:
        return self._output_dim

    def _split(self, x: Tensor) -> Tensor:
        """(B, L, H*dk) -> (B, H, L, dk)."""
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def queries(self, query: Tensor) -> Tensor:
        """Q W^Q split into heads: (B, T, Dq) -> (B, H, T, dk)."""
        return self._split(self.query_proj(query))

    def keys_values(self, values: Tensor) -> tuple[Tensor, Tensor]:
        """K W^K and V W^V split into heads: (B, S, Dv) -> (B, H, S, dk) each."""
        return self._split(self.key_proj(values)), self._split(self.value_proj(values))

    def merge(self, heads: Tensor) -> Tensor:
        """Concat(head_1..head_h) W^O: (B, H, T, dk) -> (B, T, output_dim)."""
        return self.out_proj(heads.transpose(1, 2).flatten(2))

    def prepare(self, memory: Memory) -> Memory:
        keys, values = self.keys_values(memory.values)  # (B, H, S, dk) each
        return memory.replace(keys=keys, projected_values=values)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        """Per-head energies (B, H, T, S); the base averages the heads' weights into ``weights``."""
        q = self.queries(query)  # (B, H, T, dk)
        return torch.matmul(q, memory.keys.transpose(-1, -2)) / math.sqrt(self.head_dim)  # (B, H, T, S)

    def read(self, weights: Tensor, memory: Memory) -> Tensor:
        dropped = self.dropout(weights).to(memory.projected_values.dtype)  # (B, H, T, S)
        return self.merge(torch.matmul(dropped, memory.projected_values))  # (B, T, output_dim)

    def context_only(
        self, query: Tensor, memory: Memory, state: dict[str, Tensor] | None = None
    ) -> AttentionOutput:
        """The context through ``F.scaled_dot_product_attention`` (fused; no weights kept): eq. (1) per head."""
        require_prepared(memory)
        q = self.queries(query)  # (B, H, T, dk)
        allowed = memory.mask[:, None, None, :]  # (B, 1, 1, S)
        dropout = self.dropout.p if self.training else 0.0
        heads = F.scaled_dot_product_attention(
            q, memory.keys.to(q.dtype), memory.projected_values.to(q.dtype), attn_mask=allowed, dropout_p=dropout
        )  # (B, H, T, dk)
        return AttentionOutput(self.merge(heads), weights=None, state={} if state is None else state)
