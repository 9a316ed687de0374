"""Transformer decoder: masked self-attention, the configured attention over the memory, feed-forward."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor, nn

from attend.attention import Attention, AttentionOutput
from attend.attention.self_attention import SelfAttention
from attend.decoders.base import Decoder
from attend.layers import FeedForward, Positions
from attend.memory import Memory

State = dict[str, Tensor | list]


class DecoderLayer(nn.Module):
    """Vaswani et al. 2017, sec. 3.1, pre-norm (Xiong et al. 2020): x + SelfAttention(LN(x)) (causal),
    x + W c with c the context of ``attention`` queried by LN(x), then x + FFN(LN(x)).

    W is the identity when the context already has d_model entries (every type of conf/attention
    with its defaults; multi-head attention brings its own W^O).
    """

    def __init__(self, d_model: int, num_heads: int, ff_dim: int, dropout: float, attention: Attention) -> None:
        super().__init__()
        self.self_norm = nn.LayerNorm(d_model)
        self.self_attention = SelfAttention(d_model, num_heads, dropout)
        self.cross_norm = nn.LayerNorm(d_model)
        self.cross_attention = attention
        out_dim = attention.output_dim
        self.context_proj = nn.Identity() if out_dim == d_model else nn.Linear(out_dim, d_model)
        self.ff_norm = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, ff_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, memory: Memory, attention_state: dict, need_weights: bool = True
    ) -> tuple[Tensor, AttentionOutput]:
        """All T steps at once: x (B, T, D) -> (B, T, D) and the attention over the memory (weights (B, T, S))."""
        x = x + self.dropout(self.self_attention(self.self_norm(x), causal=True))  # (B, T, D)
        return self._attend_and_feed(x, memory, attention_state, need_weights)

    def step(
        self, x: Tensor, memory: Memory, state: dict, need_weights: bool = True
    ) -> tuple[Tensor, AttentionOutput, dict]:
        """One step x (B, 1, D) given the cached keys and values of the earlier steps -> (B, 1, D)."""
        cache = {"keys": state["keys"], "values": state["values"]}
        attended_self, cache = self.self_attention.step(self.self_norm(x), cache)  # (B, 1, D)
        x, attended = self._attend_and_feed(x + self.dropout(attended_self), memory, state["attention"], need_weights)
        return x, attended, {**cache, "attention": attended.state}

    def _attend_and_feed(
        self, x: Tensor, memory: Memory, attention_state: dict, need_weights: bool
    ) -> tuple[Tensor, AttentionOutput]:
        # layers whose weights nobody reads let the attention skip them (multi-head: a fused kernel)
        attend = self.cross_attention if need_weights else self.cross_attention.context_only
        attended = attend(self.cross_norm(x), memory, attention_state)  # context (B, T, Dv)
        x = x + self.dropout(self.context_proj(attended.context))  # (B, T, D)
        return x + self.dropout(self.feed_forward(self.ff_norm(x))), attended  # (B, T, D)


class TransformerDecoder(Decoder):
    """Vaswani et al. 2017, "Attention Is All You Need", sec. 3.1 decoder with pre-norm layers and a
    final LayerNorm; the attention over the memory in every layer is the configured type (with
    attention=multihead this is the paper's model).

    ``prepare`` projects the memory to d_model (when its size differs) and runs every layer's
    ``attention.prepare`` once per source, stacking the keys (and projected values) along a new
    axis 1, so beam search tiles and reorders them like any memory. The search state is
    ``{"layers": [{"keys": (B, H, t, dk), "values": (B, H, t, dk), "attention": {...}}, ...]}``:
    each step attends with its own position only (O(t)). The returned attention is the last
    layer's, with ``log_prob`` and ``entropy`` summed over the layers (hard attention samples in each);
    the layers below it ask for the context only, which multi-head attention computes fused.
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        attention: Callable[..., Attention],
        pad_id: int = 0,
        d_model: int = 256,
        num_layers: int = 3,
        num_heads: int = 4,
        ff_dim: int = 1024,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
        max_positions: int = 1024,
        tie_embeddings: bool = False,
        doubly_stochastic: float = 0.0,
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"decoder.num_heads must divide decoder.d_model, got {num_heads} and {d_model}")
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)  # fairseq: unit scale after the sqrt(d)
        nn.init.zeros_(self.embedding.weight[pad_id])
        self.scale = math.sqrt(d_model)
        self.positions = Positions(d_model, positions, max_positions)
        self.memory_proj = nn.Identity() if memory_dim == d_model else nn.Linear(memory_dim, d_model)
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, ff_dim, dropout, attention(query_dim=d_model, value_dim=d_model))
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.output_layer = nn.Linear(d_model, vocab_size)
        if tie_embeddings:
            self.output_layer.weight = self.embedding.weight  # Press and Wolf 2017
        self.dropout = nn.Dropout(dropout)
        self.doubly_stochastic = doubly_stochastic

    # -- the Decoder contract -------------------------------------------------------------
    def prepare(self, memory: Memory) -> Memory:
        """Every layer's keys once per source, stacked: keys (B, L, ...), projected_values (B, L, ...) or None."""
        memory = memory.replace(values=self.memory_proj(memory.values), keys=None, projected_values=None)
        prepared = [layer.cross_attention.prepare(memory) for layer in self.layers]
        keys = torch.stack([p.keys for p in prepared], dim=1)  # (B, L, ...)
        values = [p.projected_values for p in prepared]
        return memory.replace(keys=keys, projected_values=None if values[0] is None else torch.stack(values, dim=1))

    def init_state(self, memory: Memory) -> State:
        """Empty self-attention caches (t = 0) and each layer's initial attention state."""
        batch = memory.values.size(0)
        layers = []
        for index, layer in enumerate(self.layers):
            cache = layer.self_attention.init_cache(batch, memory.values)  # (B, H, 0, dk)
            layers.append({**cache, "attention": layer.cross_attention.init_state(self.layer_memory(memory, index))})
        return {"layers": layers}

    def step(self, prev_tokens: Tensor, memory: Memory, state: State) -> tuple[Tensor, AttentionOutput, State]:
        """prev_tokens (B,) -> logits (B, V), the step's attention (weights (B, 1, S)), new state."""
        position = state["layers"][0]["keys"].size(2)  # t: steps already taken
        x = self.embed(prev_tokens.unsqueeze(1), position)  # (B, 1, D)
        layers, attended, last = [], [], len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            x, layer_attended, layer_state = layer.step(
                x, self.layer_memory(memory, index), state["layers"][index], need_weights=index == last
            )
            layers.append(layer_state)
            attended.append(layer_attended)
        logits = self.output_layer(self.norm(x)).squeeze(1)  # (B, V)
        return logits, sum_over_layers(attended), {"layers": layers}

    def forward(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, AttentionOutput]:
        """Teacher forcing, all steps at once: tgt_in (B, T) -> logits (B, T, V), attention (weights (B, T, S))."""
        if memory.keys is None:
            memory = self.prepare(memory)
        x = self.embed(tgt_in, 0)  # (B, T, D)
        attended, last = [], len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            layer_memory = self.layer_memory(memory, index)
            state = layer.cross_attention.init_state(layer_memory)
            x, layer_attended = layer(x, layer_memory, state, need_weights=index == last)  # only the last returned
            attended.append(layer_attended)
        return self.output_layer(self.norm(x)), sum_over_layers(attended)  # (B, T, V)

    # -- helpers ---------------------------------------------------------------------------
    def embed(self, tokens: Tensor, start: int) -> Tensor:
        """Tokens (B, T) at positions start .. start + T - 1 -> E y * sqrt(d_model) + PE (B, T, D)."""
        x = self.embedding(tokens) * self.scale  # (B, T, D)
        return self.dropout(x + self.positions(start, tokens.size(1), x))

    @staticmethod
    def layer_memory(memory: Memory, index: int) -> Memory:
        """The prepared memory as layer ``index``'s attention prepared it."""
        values = memory.projected_values
        return memory.replace(keys=memory.keys[:, index], projected_values=None if values is None else values[:, index])


def sum_over_layers(outputs: list[AttentionOutput]) -> AttentionOutput:
    """The last layer's attention, with log p(s) and entropy (B, T) of sampled positions summed over layers."""
    last = outputs[-1]
    if last.log_prob is None:
        return last
    return replace(
        last, log_prob=sum(out.log_prob for out in outputs), entropy=sum(out.entropy for out in outputs)
    )
