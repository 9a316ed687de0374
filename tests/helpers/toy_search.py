"""A toy decoder whose logits are a fixed function of the prefix, so that brute force can check a search, with
the rules that give its logits and a memory to search over."""

from __future__ import annotations

import math

import torch

from attend.attention import AttentionOutput
from attend.memory import Memory

SPECIAL = {"bos_id": 1, "eos_id": 2, "pad_id": 0}


class ToyDecoder:
    """Five tokens (pad 0, bos 1, eos 2, 3, 4); logits ``rule(prefix code, step, memory)`` (B, 5), weights
    that depend on the whole prefix. Follows the decoder contract search uses: prepare, init_state, step."""

    def __init__(self, rule):
        self.rule = rule

    def prepare(self, memory):
        return memory

    def init_state(self, memory):
        zeros = torch.zeros(memory.values.size(0), dtype=torch.long, device=memory.values.device)
        return {"step": zeros, "prefix": zeros.clone()}

    def step(self, prev, memory, state):
        prefix = state["prefix"] * 7 + prev  # (B,) a code of the whole prefix
        energies = memory.values[:, :, 0] * (prefix % 11 + 1).unsqueeze(1)  # (B, S)
        weights = torch.softmax(energies.masked_fill(~memory.mask, -torch.inf), dim=-1).unsqueeze(1)  # (B, 1, S)
        attended = AttentionOutput(context=weights @ memory.values, weights=weights)
        return self.rule(prefix, state["step"], memory), attended, {"step": state["step"] + 1, "prefix": prefix}


TABLE = 2 * torch.randn(101, 5, generator=torch.Generator().manual_seed(0))


def hashed(prefix, step, memory):
    """Pseudo-random logits (B, 5) of the prefix and the source's length."""
    return TABLE[(prefix + 13 * memory.lengths) % 101]


def toy_memory(lengths=(5, 3, 1)):
    """Random values (B, S, 3) for sources of these lengths, zero and masked past each length."""
    values = torch.randn(len(lengths), max(lengths), 3, generator=torch.Generator().manual_seed(0))
    mask = torch.arange(max(lengths)) < torch.tensor(lengths).unsqueeze(1)
    return Memory(values=values * mask.unsqueeze(-1), mask=mask)


def eager_to_end(prefix, step, memory):
    """The end token (p 0.6) or 3 (p 0.4) at every step."""
    return torch.tensor([-30.0, -30.0, math.log(0.6), math.log(0.4), -30.0]).expand(prefix.size(0), -1)
