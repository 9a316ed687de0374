"""Multi-head self-attention with fused kernels and an incremental key/value cache for search."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attend.attention.multihead import MultiHeadAttention

Cache = dict[str, Tensor]


class SelfAttention(nn.Module):
    """Vaswani et al. 2017, "Attention Is All You Need", sec. 3.2.3: a sequence attends to itself
    (masked to earlier positions in the decoder) with the heads of sec. 3.2.2.

    The projections are those of Attend's ``MultiHeadAttention``; the product runs in
    ``F.scaled_dot_product_attention`` (fused, no weights kept: self-attention weights are never
    plotted). ``step`` appends one position's keys and values to a cache
    ``{"keys": (B, H, t, dk), "values": (B, H, t, dk)}`` and attends with that position only: a
    search step costs O(t), not O(t^2).
    """

    def __init__(self, dim: int, num_heads: int = 4, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads = MultiHeadAttention(dim, dim, num_heads=num_heads, dropout=dropout)
        self.dropout = dropout

    def forward(self, x: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """x (B, T, D) -> (B, T, D); ``mask`` (B, T) True on real positions; ``causal``: no look ahead."""
        q = self.heads.queries(x)  # (B, H, T, dk)
        k, v = self.heads.keys_values(x)  # (B, H, T, dk) each
        return self.heads.merge(self.attend(q, k, v, mask, causal))  # (B, T, D)

    def init_cache(self, batch: int, like: Tensor) -> Cache:
        """Empty keys and values (B, H, 0, dk) on ``like``'s device and dtype."""
        empty = like.new_zeros(batch, self.heads.num_heads, 0, self.heads.head_dim)  # (B, H, 0, dk)
        return {"keys": empty, "values": empty}

    def step(self, x: Tensor, cache: Cache) -> tuple[Tensor, Cache]:
        """One new position x (B, 1, D) attends over the cached t and itself: (B, 1, D), cache of t + 1."""
        q = self.heads.queries(x)  # (B, H, 1, dk)
        k, v = self.heads.keys_values(x)  # (B, H, 1, dk) each
        keys = torch.cat([cache["keys"], k], dim=2)  # (B, H, t+1, dk)
        values = torch.cat([cache["values"], v], dim=2)  # (B, H, t+1, dk)
        out = self.heads.merge(self.attend(q, keys, values))  # (B, 1, D)
        return out, {"keys": keys, "values": values}

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """softmax(Q K^T / sqrt(dk)) V per head (eq. 1), fused: (B, H, T, dk) -> (B, H, T, dk)."""
        dropout = self.dropout if self.training else 0.0
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal)
        allowed = mask[:, None, None, :]  # (B, 1, 1, S): real keys
        if causal:
            steps = torch.ones(q.size(2), k.size(2), dtype=torch.bool, device=q.device).tril()  # (T, S)
            allowed = allowed & steps  # (B, 1, T, S)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout)
