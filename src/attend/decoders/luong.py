"""Luong flow: run the cell first, attend with h_i, output from tanh(W[c_i; h_i])."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from attend.attention import Attention, AttentionOutput
from attend.decoders.rnn import RNNDecoder, State
from attend.memory import Memory


class LuongDecoder(RNNDecoder):
    """Luong et al. 2015, eq. 5: h~_t = tanh(W_c [c_t; h_t]); sec. 3.3 input feeding feeds h~_{t-1}
    back with the next input. Without input feeding the whole target runs through the RNN in one
    call and attends for all steps at once (T > 1 queries).
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        attention: Callable[..., Attention],
        pad_id: int = 0,
        embedding_dim: int = 256,
        hidden_size: int = 512,
        num_layers: int = 1,
        rnn_type: str = "gru",
        dropout: float = 0.1,
        output_dim: int | None = None,
        tie_embeddings: bool = False,
        init_state: str = "bridge",
        context_gate: bool = False,
        doubly_stochastic: float = 0.0,
        sampling_probability: float = 0.0,
        word_dropout: float = 0.0,
        *,
        input_feeding: bool = True,
    ) -> None:
        self.input_feeding = input_feeding
        # RNNDecoder's options, spelled out so that the start-up type check (config_types) reads them
        super().__init__(
            vocab_size,
            memory_dim,
            attention,
            pad_id=pad_id,
            embedding_dim=embedding_dim,
            hidden_size=hidden_size,
            num_layers=num_layers,
            rnn_type=rnn_type,
            dropout=dropout,
            output_dim=output_dim,
            tie_embeddings=tie_embeddings,
            init_state=init_state,
            context_gate=context_gate,
            doubly_stochastic=doubly_stochastic,
            sampling_probability=sampling_probability,
            word_dropout=word_dropout,
        )

    def combine_layer(self, embedding_dim: int) -> nn.Linear:
        """W_c of h~_i = tanh(W_c [c_i; h_i]) (Luong et al. eq. 5)."""
        return nn.Linear(self.attention.output_dim + self.hidden_size, self.output_dim, bias=False)

    def rnn_input_size(self, embedding_dim: int, context_dim: int) -> int:
        return embedding_dim + (self._feed_dim() if self.input_feeding else 0)

    def _feed_dim(self) -> int:
        return self.output_dim

    def init_state(self, memory: Memory) -> State:
        state = super().init_state(memory)
        if self.input_feeding:
            state["feed"] = memory.values.new_zeros(memory.values.size(0), 1, self.output_dim)
        return state

    def _attend_and_combine(self, outputs: Tensor, memory: Memory, attention_state: dict):
        attended = self.attention(outputs, memory, attention_state)  # context (B, T, Dv)
        context = self.gate(attended.context, outputs)  # (B, T, Dv)
        features = torch.tanh(self.combine(torch.cat([context, outputs], dim=-1)))  # (B, T, O)
        return features, attended

    def _step_features(
        self, embedded: Tensor, memory: Memory, state: State
    ) -> tuple[Tensor, AttentionOutput, State]:
        inputs = torch.cat([embedded, state["feed"]], dim=-1) if self.input_feeding else embedded
        outputs, new_state = self.run_rnn(inputs, state)  # (B, 1, H)
        features, attended = self._attend_and_combine(outputs, memory, state["attention"])
        new_state["attention"] = attended.state
        if self.input_feeding:
            new_state["feed"] = features
        return self.dropout(features), attended, new_state

    def features(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, AttentionOutput]:
        if self.input_feeding or self.attention.init_state(memory):
            return super().features(tgt_in, memory)  # each step needs the previous one
        embedded = self.embed_targets(tgt_in)  # (B, T, E)
        outputs, _ = self.run_rnn(embedded, self.init_state(memory))  # (B, T, H): one fused call
        features, attended = self._attend_and_combine(outputs, memory, {})
        return self.dropout(features), attended
