"""Location-aware attention: the energies also see a convolution of the previous weights."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.attention.base import Attention, AttentionOutput, require_prepared
from attend.attention.energy import additive_energies
from attend.memory import Memory


class LocationAttention(Attention):
    """Chorowski et al. 2015, "Attention-Based Models for Speech Recognition", eqs. (8)-(9):
    f_i = F * alpha_{i-1},  e_ij = w^T tanh(W s_{i-1} + V h_j + U f_ij + b).

    The state ``{"previous": (B, S), "cumulative": (B, S)}`` carries alpha_{i-1} and the sum of all
    weights produced so far, batch first, so search reorders it like any other state. It starts
    from uniform weights over the valid positions (as ESPnet's AttLoc) and a zero sum (nothing has
    been attended yet). With ``cumulative`` F reads both as two channels (Shen et al. 2018,
    "Natural TTS Synthesis by Conditioning WaveNet on Mel Spectrogram Predictions", sec. 2.2);
    otherwise only alpha_{i-1}, as in the paper.

    F is a Conv1d of ``kernel_size`` over a sequence memory and a Conv2d of ``grid_kernel_size``
    over the weights folded onto an image grid (``memory.grid``). Each step needs the previous
    step's weights, so ``forward`` runs T > 1 queries one step after another.
    """

    def __init__(
        self,
        query_dim: int,
        value_dim: int,
        hidden_dim: int = 128,
        channels: int = 32,
        kernel_size: int = 31,
        grid_kernel_size: int = 5,
        cumulative: bool = True,
        max_elements: int = 2**25,
    ) -> None:
        super().__init__(query_dim, value_dim)
        for name, size in (("kernel_size", kernel_size), ("grid_kernel_size", grid_kernel_size)):
            if size < 1 or size % 2 == 0:
                raise ValueError(f"attention=location needs an odd {name} (same-length output), got {size}")
        self.cumulative = cumulative
        self.max_elements = max_elements
        in_channels = 2 if cumulative else 1
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W
        self.key_proj = nn.Linear(value_dim, hidden_dim, bias=True)  # V (its bias is b)
        self.conv = nn.Conv1d(in_channels, channels, kernel_size, padding=kernel_size // 2, bias=False)  # F
        self.grid_conv = nn.Conv2d(
            in_channels, channels, grid_kernel_size, padding=grid_kernel_size // 2, bias=False
        )  # F over an image grid
        self.location_proj = nn.Linear(channels, hidden_dim, bias=False)  # U
        self.v = nn.Linear(hidden_dim, 1, bias=False)  # w

    def prepare(self, memory: Memory) -> Memory:
        if memory.grid is not None and memory.grid[0] * memory.grid[1] != memory.values.size(1):
            raise ValueError(f"memory.grid {memory.grid} does not cover its {memory.values.size(1)} positions")
        return memory.replace(keys=self.key_proj(memory.values))  # (B, S, A): V h_j + b

    def init_state(self, memory: Memory) -> dict[str, Tensor]:
        """Uniform weights over the valid positions as alpha_0; a zero sum of past weights."""
        mask = memory.mask.to(memory.values.dtype)  # (B, S)
        previous = mask / mask.sum(dim=1, keepdim=True).clamp(min=1.0)  # (B, S)
        return {"previous": previous, "cumulative": torch.zeros_like(previous)}

    def location(self, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        """U f_i: the convolved previous (and cumulative) weights projected, (B, S, A)."""
        planes = [state["previous"], state["cumulative"]] if self.cumulative else [state["previous"]]
        alpha = torch.stack(planes, dim=1).to(self.conv.weight.dtype)  # (B, C_in, S)
        if memory.grid is None:
            features = self.conv(alpha)  # (B, C, S)
            unused = self.grid_conv.weight
        else:
            features = self.grid_conv(alpha.unflatten(2, memory.grid)).flatten(2)  # (B, C, H*W)
            unused = self.conv.weight
        # a zero term keeps the other filter in the graph (DDP without find_unused_parameters)
        return self.location_proj(features.transpose(1, 2)) + 0.0 * unused.sum()  # (B, S, A)

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        """Energies of queries (B, T, Dq) given the state's alpha_{i-1}: (B, T, S)."""
        q = self.query_proj(query)  # (B, T, A)
        keys = memory.keys + self.location(memory, state)  # (B, S, A): V h_j + b + U f_ij
        return additive_energies(q, keys, self.v, self.max_elements)  # (B, T, S)

    def next_state(self, weights: Tensor, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """After weights (B, T, S): the last step's weights and the sum of all so far."""
        weights = weights.to(state["previous"].dtype)
        return {"previous": weights[:, -1], "cumulative": state["cumulative"] + weights.sum(dim=1)}

    def forward(self, query: Tensor, memory: Memory, state: dict[str, Tensor] | None = None) -> AttentionOutput:
        """Queries (B, T, Dq) one step after another, each from the state the previous left."""
        require_prepared(memory)
        state = state if state else self.init_state(memory)
        contexts, all_weights = [], []
        for t in range(query.size(1)):
            energies = self.score(query[:, t : t + 1], memory, state)  # (B, 1, S)
            weights = self.normalize(energies, memory.mask)  # (B, 1, S)
            contexts.append(self.read(weights, memory))  # (B, 1, Dv)
            all_weights.append(weights)
            state = self.next_state(weights, state)
        return AttentionOutput(torch.cat(contexts, dim=1), torch.cat(all_weights, dim=1), state)
