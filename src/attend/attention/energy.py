"""Additive energies v^T tanh(q_t + k_s), chunked so long memories never hold B*T*S*A at once."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint


def additive_energies(queries: Tensor, keys: Tensor, v: nn.Linear, max_elements: int = 2**25) -> Tensor:
    """v^T tanh(q_t + k_s) for every (t, s): queries (B, T, A), keys (B, S, A) -> (B, T, S).

    When the hidden tensor (B, T, S, A) has at most ``max_elements`` elements it is computed at
    once. Otherwise it is computed in chunks over T, then B, then S, each holding at most
    ``max_elements`` (or one hidden vector of A when A alone is larger); while autograd records,
    each chunk is checkpointed so that backward recomputes its tanh instead of keeping it.
    """
    batch, steps, size = queries.shape
    positions = keys.size(1)
    if batch * steps * positions * size <= max_elements:
        return _energies(queries, keys, v)
    recording = torch.is_grad_enabled() and (
        queries.requires_grad or keys.requires_grad or any(p.requires_grad for p in v.parameters())
    )
    b_size, t_size, s_size = chunk_sizes(batch, steps, positions, size, max_elements)
    rows = []
    for b in range(0, batch, b_size):
        per_t = []
        for t in range(0, steps, t_size):
            q = queries[b : b + b_size, t : t + t_size]  # (b, t, A)
            per_s = []
            for s in range(0, positions, s_size):
                k = keys[b : b + b_size, s : s + s_size]  # (b, s, A)
                if recording:
                    per_s.append(checkpoint(_energies, q, k, v, use_reentrant=False))
                else:
                    per_s.append(_energies(q, k, v))
            per_t.append(torch.cat(per_s, dim=2))  # (b, t, S)
        rows.append(torch.cat(per_t, dim=1))  # (b, T, S)
    return torch.cat(rows, dim=0)  # (B, T, S)


def chunk_sizes(batch: int, steps: int, positions: int, size: int, max_elements: int) -> tuple[int, int, int]:
    """Chunk lengths over (B, T, S): whole S rows where they fit, split over T first, then B, then S."""
    row = positions * size  # one (b, t) pair
    if row > max_elements:
        return 1, 1, max(1, max_elements // size)
    if batch * row > max_elements:
        return max(1, max_elements // row), 1, positions
    return batch, max(1, max_elements // (batch * row)), positions


def _energies(queries: Tensor, keys: Tensor, v: nn.Linear) -> Tensor:
    """The direct computation: (B, T, A), (B, S, A) -> (B, T, S)."""
    hidden = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))  # (B, T, S, A)
    return v(hidden).squeeze(-1)  # (B, T, S)
