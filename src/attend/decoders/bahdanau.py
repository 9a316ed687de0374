"""Bahdanau flow: attend with the previous state, feed [y_{i-1}; c_i] to the cell."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.attention import AttentionOutput
from attend.decoders.rnn import RNNDecoder, State
from attend.memory import Memory


class BahdanauDecoder(RNNDecoder):
    """Bahdanau et al. 2015, appendix A.2.2: c_i from s_{i-1}; s_i = f(s_{i-1}, [E y_{i-1}; c_i]);
    the output reads t_i = tanh(W [s_i; c_i; E y_{i-1}]) (a tanh layer in place of the maxout).

    The output layer never feeds back, so teacher forcing runs only the recurrence step by step
    and applies W (and the vocabulary projection) once to all steps.
    """

    def combine_layer(self, embedding_dim: int) -> nn.Linear:
        """W of t_i = tanh(W [s_i; c_i; E y_{i-1}])."""
        return nn.Linear(self.hidden_size + self.attention.output_dim + embedding_dim, self.output_dim)

    def rnn_input_size(self, embedding_dim: int, context_dim: int) -> int:
        return embedding_dim + context_dim

    def _recur(
        self, embedded: Tensor, memory: Memory, state: State
    ) -> tuple[Tensor, Tensor, AttentionOutput, State]:
        """One recurrent step: (outputs (B, 1, H), context (B, 1, Dv), attention (weights (B, 1, S)), state)."""
        query = state["hidden"][:, -1:]  # (B, 1, H): top layer s_{i-1}
        attended = self.attention(query, memory, state["attention"])
        context = self.gate(attended.context, query)  # (B, 1, Dv)
        outputs, new_state = self.run_rnn(torch.cat([embedded, context], dim=-1), state)  # (B, 1, H)
        new_state["attention"] = attended.state
        return outputs, context, attended, new_state

    def _output(self, outputs: Tensor, context: Tensor, embedded: Tensor) -> Tensor:
        """t_i for any number of steps: (B, T, H), (B, T, Dv), (B, T, E) -> (B, T, O)."""
        return self.dropout(torch.tanh(self.combine(torch.cat([outputs, context, embedded], dim=-1))))

    def _step_features(
        self, embedded: Tensor, memory: Memory, state: State
    ) -> tuple[Tensor, AttentionOutput, State]:
        outputs, context, attended, state = self._recur(embedded, memory, state)
        return self._output(outputs, context, embedded), attended, state

    def features(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, AttentionOutput]:
        embedded = self.embed_targets(tgt_in)  # (B, T, E)
        state = self.init_state(memory)
        outputs, contexts, attended = [], [], []
        for t in range(tgt_in.size(1)):
            output, context, step_attended, state = self._recur(embedded[:, t : t + 1], memory, state)
            outputs.append(output)
            contexts.append(context)
            attended.append(step_attended)
        features = self._output(torch.cat(outputs, dim=1), torch.cat(contexts, dim=1), embedded)  # (B, T, O)
        return features, AttentionOutput.cat(attended)  # (B, T, O), weights (B, T, S)
