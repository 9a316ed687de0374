"""The Attention interface: every type only writes its energy function."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from attend.memory import Memory


@dataclass
class AttentionOutput:
    """What attention returns for T query steps; decoders return it too, for all their steps."""

    context: Tensor  # (B, T, Dv)
    weights: Tensor | None  # (B, T, S); None only from ``context_only`` of a type that skips them
    state: dict[str, Tensor] = field(default_factory=dict)
    head_weights: Tensor | None = None  # (B, H, T, S) for multi-head attention
    log_prob: Tensor | None = None  # (B, T) log-probability of sampled positions (hard attention, training)
    entropy: Tensor | None = None  # (B, T) entropy of the distribution sampled from (hard attention, training)

    @classmethod
    def cat(cls, outputs: list[AttentionOutput]) -> AttentionOutput:
        """Consecutive steps joined along T; the state is the last one's."""

        def join(name: str, dim: int) -> Tensor | None:
            parts = [getattr(out, name) for out in outputs]
            return None if parts[0] is None else torch.cat(parts, dim=dim)

        return cls(
            context=join("context", 1),
            weights=join("weights", 1),
            state=outputs[-1].state,
            head_weights=join("head_weights", 2),
            log_prob=join("log_prob", 1),
            entropy=join("entropy", 1),
        )


def mask_value(dtype: torch.dtype) -> float:
    """The most negative finite value of ``dtype``: exp() underflows to 0 in bf16/fp16/fp32."""
    return torch.finfo(dtype).min


def masked_softmax(energies: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis with exactly zero weight where ``mask`` is False.

    energies: (..., T, S); mask: (B, S) broadcast over the middle axes.
    """
    mask = mask.view(mask.size(0), *([1] * (energies.dim() - 2)), mask.size(1))
    weights = torch.softmax(energies.masked_fill(~mask, mask_value(energies.dtype)), dim=-1)
    return weights.masked_fill(~mask, 0.0)


class Attention(nn.Module):
    """Base class: ``prepare`` once per source, then ``forward`` per query (T >= 1 steps).

    Subclasses write ``score`` and, when they project keys, ``prepare``. Completed by the
    decoder with ``query_dim`` and ``value_dim`` (an attention config is a ``_partial_``).
    """

    def __init__(self, query_dim: int, value_dim: int) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.value_dim = value_dim

    @property
    def output_dim(self) -> int:
        """Size of ``context``."""
        return self.value_dim

    def prepare(self, memory: Memory) -> Memory:
        """Project keys once per source; default: keys are the values."""
        return memory.replace(keys=memory.values)

    def init_state(self, memory: Memory) -> dict[str, Tensor]:
        return {}

    def score(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> Tensor:
        """Energies of queries (B, T, Dq) against the prepared memory: (B, T, S), or (B, H, T, S) for heads."""
        raise NotImplementedError

    def normalize(self, energies: Tensor, mask: Tensor) -> Tensor:
        return masked_softmax(energies, mask)

    def read(self, weights: Tensor, memory: Memory) -> Tensor:
        """Context from weights (B, T, S): the weighted sum of the values (B, T, Dv)."""
        return torch.bmm(weights.to(memory.values.dtype), memory.values)

    def next_state(self, weights: Tensor, state: dict[str, Tensor]) -> dict[str, Tensor]:
        return state

    def context_only(
        self, query: Tensor, memory: Memory, state: dict[str, Tensor] | None = None
    ) -> AttentionOutput:
        """For callers that do not read the weights (a Transformer's lower layers): a type may skip them
        (``weights`` None) when it has a faster way to the context; by default the full ``forward``."""
        return self(query, memory, state)

    def forward(
        self, query: Tensor, memory: Memory, state: dict[str, Tensor] | None = None
    ) -> AttentionOutput:
        require_prepared(memory)
        state = {} if state is None else state
        energies = self.score(query, memory, state)  # (B, T, S) or (B, H, T, S)
        all_weights = self.normalize(energies, memory.mask)  # same shape
        context = self.read(all_weights, memory)  # (B, T, Dv)
        heads = all_weights if all_weights.dim() == 4 else None
        weights = all_weights if heads is None else heads.mean(dim=1)  # (B, T, S)
        return AttentionOutput(context, weights, self.next_state(weights, state), head_weights=heads)


def require_prepared(memory: Memory) -> None:
    """A clear error when attention runs on a memory that ``prepare`` has not seen."""
    if memory.keys is None:
        raise ValueError("memory has no keys: call attention.prepare(memory) once per source first")
