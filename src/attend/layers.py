"""Layers that encoders and decoders share: the positional encodings and the Transformer's feed-forward block."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

POSITION_KINDS = ("sinusoidal", "learned")


class Positions(nn.Module):
    """Vaswani et al. 2017, sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...),
    or ``learned``: one trained vector for each of ``max_positions`` positions (Gehring et al. 2017)."""

    def __init__(self, dim: int, kind: str = "sinusoidal", max_positions: int = 1024) -> None:
        super().__init__()
        if kind not in POSITION_KINDS:
            raise ValueError(f"positions must be one of {POSITION_KINDS}, got {kind!r}")
        if kind == "sinusoidal" and dim % 2:
            raise ValueError(f"sinusoidal positions need an even size (sin and cos pairs), got {dim}")
        self.dim = dim
        self.max_positions = max_positions
        self.table = nn.Embedding(max_positions, dim) if kind == "learned" else None
        if self.table is not None:
            nn.init.normal_(self.table.weight, std=dim**-0.5)

    def forward(self, start: int, length: int, like: Tensor) -> Tensor:
        """Encodings of positions start .. start + length - 1: (length, dim), on ``like``'s device and dtype."""
        positions = torch.arange(start, start + length, device=like.device)  # (L,)
        if self.table is not None:
            if start + length > self.max_positions:
                raise ValueError(
                    f"learned positions cover {self.max_positions} positions, position {start + length - 1} "
                    f"was asked for: raise max_positions or use positions=sinusoidal"
                )
            return self.table(positions).to(like.dtype)  # (L, dim)
        inverse = torch.exp(torch.arange(0, self.dim, 2, device=like.device) * (-math.log(10000.0) / self.dim))
        angles = positions.unsqueeze(1) * inverse  # (L, dim / 2)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).to(like.dtype)  # (L, dim)


class FeedForward(nn.Sequential):
    """Vaswani et al. 2017, eq. 2: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0) -> None:
        super().__init__(nn.Linear(dim, hidden_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden_dim, dim))


class TokenDropout(nn.Module):
    """Word dropout (Gal and Ghahramani 2016; Sennrich and Zhang 2019, sec. 3): in training, each token's whole
    embedding is zeroed with probability ``p`` and the kept ones scaled by 1 / (1 - p), so the model cannot lean on
    any one token of its input; the identity in evaluation."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"word_dropout must be in [0, 1), got {p}")
        self.p = p

    def forward(self, embedded: Tensor) -> Tensor:
        """embedded (B, S, E) -> (B, S, E), whole rows dropped."""
        if not self.training or self.p == 0.0:
            return embedded
        keep = torch.empty(embedded.shape[:-1] + (1,), device=embedded.device, dtype=embedded.dtype)
        keep.bernoulli_(1.0 - self.p)  # (B, S, 1)
        return embedded * keep / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"
