"""Bahdanau flow: attend with the previous state, feed [y_{i-1}; c_i] to the cell."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.decoders.rnn import RNNDecoder, State
from attend.memory import Memory


class BahdanauDecoder(RNNDecoder):
    """Bahdanau et al. 2015, appendix A.2.2: c_i from s_{i-1}; s_i = f(s_{i-1}, [E y_{i-1}; c_i]);
    the output reads t_i = tanh(W [s_i; c_i; E y_{i-1}]) (a tanh layer in place of the maxout).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        embedding_dim = self.embedding.embedding_dim
        self.combine = nn.Linear(
            self.hidden_size + self.attention.output_dim + embedding_dim, self.output_dim
        )

    def rnn_input_size(self, embedding_dim: int, context_dim: int) -> int:
        return embedding_dim + context_dim

    def _step_features(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, Tensor, State]:
        query = state["hidden"][:, -1:]  # (B, 1, H): top layer s_{i-1}
        attended = self.attention(query, memory, state["attention"])
        context = attended.context  # (B, 1, Dv)
        outputs, new_state = self.run_rnn(torch.cat([embedded, context], dim=-1), state)  # (B, 1, H)
        new_state["attention"] = attended.state
        features = torch.tanh(self.combine(torch.cat([outputs, context, embedded], dim=-1)))  # (B, 1, O)
        return self.dropout(features), attended.weights, new_state
