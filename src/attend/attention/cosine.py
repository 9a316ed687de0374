"""Cosine (content-based addressing) attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attend.attention.base import Attention
from attend.memory import Memory


class CosineAttention(Attention):
    """Graves et al. 2014, "Neural Turing Machines", eq. (5)-(6) content-based addressing:
    e_ts = beta * K[q_t, k_s], with K the cosine similarity and beta > 0 a key strength that
    sharpens the distribution (here one learnable scalar, initialised to ``scale``).

    Keys: when query_dim != value_dim, ``prepare`` projects the values to query_dim with a linear
    layer; when the sizes match the values are used as they are (pure NTM addressing). Either
    way ``prepare`` L2-normalises the keys once per source; ``score`` normalises the query.
    """

    def __init__(self, query_dim: int, value_dim: int, scale: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__(query_dim, value_dim)
        self.key_proj = nn.Linear(value_dim, query_dim) if query_dim != value_dim else nn.Identity()
        self.scale = nn.Parameter(torch.tensor(float(scale)))
        self.eps = eps

    def prepare(self, memory: Memory) -> Memory:
        keys = F.normalize(self.key_proj(memory.values), dim=-1, eps=self.eps)  # (B, S, Dq)
        return memory.replace(keys=keys)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        q = F.normalize(query, dim=-1, eps=self.eps)  # (B, T, Dq)
        return self.scale * torch.bmm(q, memory.keys.transpose(1, 2))  # (B, T, S)
