"""Bahdanau flow: attend with the previous state, feed [y_{i-1}; c_i] to the cell."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from attend.attention import Attention, AttentionOutput
from attend.decoders.rnn import RNNDecoder, State
from attend.memory import Memory


class BahdanauDecoder(RNNDecoder):
    """Bahdanau et al. 2015, appendix A.2.2: c_i from s_{i-1}; s_i = f(s_{i-1}, [E y_{i-1}; c_i]);
    the output reads t_i = tanh(W [s_i; c_i; E y_{i-1}]) (a tanh layer in place of the maxout).

    The output layer never feeds back, so teacher forcing runs only the recurrence step by step
    and applies W (and the vocabulary projection) once to all steps.
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
    ) -> None:
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
        )
        embedding_dim = self.embedding.embedding_dim
        self.combine = nn.Linear(self.hidden_size + self.attention.output_dim + embedding_dim, self.output_dim)

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
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        state = self.init_state(memory)
        outputs, contexts, attended = [], [], []
        for t in range(tgt_in.size(1)):
            output, context, step_attended, state = self._recur(embedded[:, t : t + 1], memory, state)
            outputs.append(output)
            contexts.append(context)
            attended.append(step_attended)
        features = self._output(torch.cat(outputs, dim=1), torch.cat(contexts, dim=1), embedded)  # (B, T, O)
        return features, AttentionOutput.cat(attended)  # (B, T, O), weights (B, T, S)
