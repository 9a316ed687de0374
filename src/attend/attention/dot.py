"""Dot-product attention."""

from __future__ import annotations

import torch
from torch import Tensor

from attend.attention.base import Attention
from attend.memory import Memory


def check_same_size(name: str, query_dim: int, value_dim: int) -> None:
    """Raise a ValueError that names both sizes and the fix when a dot product is undefined."""
    if query_dim != value_dim:
        raise ValueError(
            f"attention={name} needs query_dim == value_dim, got query_dim={query_dim} "
            f"(decoder hidden size) and value_dim={value_dim} (encoder output size): "
            f"use attention=general (a learned W_a between the two sizes), or set decoder.hidden_size={value_dim} "
            f"(decoder.d_model for the transformer decoder) to equal the encoder output size"
        )


class DotAttention(Attention):
    """Luong et al. 2015, "Effective Approaches to Attention-based Neural Machine Translation",
    eq. (8) "dot": score(h_t, h_s) = h_t^T h_s.

    No parameters; the keys are the values (the base ``prepare``), so query_dim must equal value_dim.
    """

    def __init__(self, query_dim: int, value_dim: int) -> None:
        check_same_size("dot", query_dim, value_dim)
        super().__init__(query_dim, value_dim)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        return torch.bmm(query, memory.keys.transpose(1, 2))  # (B, T, S)
