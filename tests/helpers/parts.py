"""Small real parts for unit tests: additive attention as a decoder takes it, and a small RNN decoder."""

from __future__ import annotations

import functools

import torch

from attend.attention import AdditiveAttention
from attend.decoders import BahdanauDecoder


def additive(hidden_dim: int = 8):
    """Additive attention waiting for its sizes, as a decoder completes it."""
    return functools.partial(AdditiveAttention, hidden_dim=hidden_dim)


def decoder(cls=BahdanauDecoder, seed=0):
    """A small RNN decoder (30 tokens, memory of 16) with seeded weights, in eval mode."""
    torch.manual_seed(seed)
    return cls(30, 16, additive(), embedding_dim=12, hidden_size=16, dropout=0.0).eval()
