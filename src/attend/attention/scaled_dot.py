"""Scaled dot-product attention."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attend.attention.base import Attention
from attend.attention.dot import check_same_size
from attend.memory import Memory


class ScaledDotAttention(Attention):
    """Vaswani et al. 2017, "Attention Is All You Need", eq. (1): softmax(q k^T / sqrt(d_k)).

    No parameters; the keys are the values (the base ``prepare``), so query_dim must equal value_dim.
    The 1/sqrt(d) keeps the energies' variance near one for unit-variance inputs.
    """

    def __init__(self, query_dim: int, value_dim: int) -> None:
        check_same_size("scaled_dot", query_dim, value_dim)
        super().__init__(query_dim, value_dim)
        self.scale = 1.0 / math.sqrt(query_dim)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        return torch.bmm(query, memory.keys.transpose(1, 2)) * self.scale  # (B, T, S)
