"""The shared part of the two RNN decoder flows: embedding, recurrent state, output layer."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from attend.attention import Attention, AttentionOutput
from attend.decoders.base import Decoder
from attend.layers import TokenDropout
from attend.memory import Memory

RNN_TYPES = {"gru": nn.GRU, "lstm": nn.LSTM}
State = dict[str, Tensor | dict]


class RNNDecoder(Decoder):
    """An attention RNN decoder; subclasses write ``_step_features`` (one flow of DESIGN.md).

    State is returned, never kept: ``{"hidden": (B, L, H)[, "cell": (B, L, H)], "attention": {...}}``,
    batch first so that search can reorder it with one generic ``index_select``. Show, Attend and
    Tell's options (Xu et al. 2015) are shared by both flows: ``context_gate`` (beta on the
    context), the LSTM cell bridged from the memory, and ``doubly_stochastic`` (``attention_penalty``).
    ``sampling_probability`` is the sampling of Listen, Attend and Spell (Chan et al. 2016, sec. 3.3);
    ``word_dropout`` zeroes whole target tokens' embeddings in teacher forcing (Sennrich and Zhang 2019).
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
    ) -> None:
        super().__init__()
        if rnn_type not in RNN_TYPES:
            raise ValueError(f"decoder.rnn_type must be one of {sorted(RNN_TYPES)}, got {rnn_type!r}")
        if not 0.0 <= sampling_probability <= 1.0:
            raise ValueError(f"decoder.sampling_probability must be in [0, 1], got {sampling_probability}")
        if init_state not in ("bridge", "zeros"):
            raise ValueError(f"decoder.init_state must be 'bridge' or 'zeros', got {init_state!r}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.is_lstm = rnn_type == "lstm"
        self.output_dim = output_dim or (embedding_dim if tie_embeddings else hidden_size)
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.word_dropout = TokenDropout(word_dropout)
        self.attention = attention(query_dim=hidden_size, value_dim=memory_dim)
        self.rnn = RNN_TYPES[rnn_type](
            self.rnn_input_size(embedding_dim, self.attention.output_dim),
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.bridge = nn.Linear(memory_dim, num_layers * hidden_size) if init_state == "bridge" else None
        # Show, Attend and Tell (Xu et al. 2015): c_0 from the memory too, sec. 3.1.2
        self.cell_bridge = (
            nn.Linear(memory_dim, num_layers * hidden_size) if self.bridge is not None and self.is_lstm else None
        )
        # Xu et al. 2015 sec. 4.2.1: beta_t = sigmoid(f_beta(h_{t-1})) scales the context
        self.context_gate = nn.Linear(hidden_size, 1) if context_gate else None
        self.doubly_stochastic = doubly_stochastic
        self.sampling_probability = sampling_probability
        self.output_layer = nn.Linear(self.output_dim, vocab_size)
        if tie_embeddings:
            if self.output_dim != embedding_dim:
                raise ValueError(
                    f"decoder.tie_embeddings needs output_dim == embedding_dim, got {self.output_dim} and "
                    f"{embedding_dim}: set decoder.output_dim to {embedding_dim} or turn tying off"
                )
            self.output_layer.weight = self.embedding.weight
        self.combine = self.combine_layer(embedding_dim)  # last, so every flow's parameters keep their order

    def rnn_input_size(self, embedding_dim: int, context_dim: int) -> int:
        raise NotImplementedError

    def combine_layer(self, embedding_dim: int) -> nn.Linear:
        """The flow's layer that combines the RNN output and the context into the output features."""
        raise NotImplementedError

    def _step_features(self, embedded: Tensor, memory: Memory, state: State) -> tuple[Tensor, AttentionOutput, State]:
        """One step: embedded (B, 1, E) -> features (B, 1, O), the step's attention (weights (B, 1, S)), new state."""
        raise NotImplementedError

    # -- the Decoder contract -------------------------------------------------------------
    def prepare(self, memory: Memory) -> Memory:
        """Project keys once per source (before beams are tiled)."""
        return self.attention.prepare(memory)

    def init_state(self, memory: Memory) -> State:
        batch = memory.values.size(0)
        shape = (batch, self.num_layers, self.hidden_size)
        summary = memory.final if memory.final is not None else masked_mean(memory.values, memory.mask)
        if self.bridge is None:
            hidden = memory.values.new_zeros(shape)
        else:
            hidden = torch.tanh(self.bridge(summary)).view(shape)  # (B, L, H)
        state: State = {"hidden": hidden, "attention": self.attention.init_state(memory)}
        if self.is_lstm and self.cell_bridge is not None:
            state["cell"] = torch.tanh(self.cell_bridge(summary)).view(shape)
        elif self.is_lstm:
            state["cell"] = torch.zeros_like(hidden)
        return state

    def step(self, prev_tokens: Tensor, memory: Memory, state: State) -> tuple[Tensor, AttentionOutput, State]:
        """prev_tokens (B,) -> logits (B, V), the step's attention (weights (B, 1, S)), new state."""
        embedded = self.dropout(self.embedding(prev_tokens.unsqueeze(1)))  # (B, 1, E)
        features, attended, state = self._step_features(embedded, memory, state)
        return self.output_layer(features.squeeze(1)), attended, state

    def forward(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, AttentionOutput]:
        """Teacher forcing: tgt_in (B, T) -> logits (B, T, V) and the attention of all steps (weights (B, T, S))."""
        if memory.keys is None:
            memory = self.prepare(memory)
        if self.training and self.sampling_probability > 0:
            return self.sampled_forward(tgt_in, memory)
        features, attended = self.features(tgt_in, memory)  # (B, T, O), weights (B, T, S)
        return self.output_layer(features), attended  # the big projection runs once, not per step

    def sampled_forward(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, AttentionOutput]:
        """Teacher forcing where each input after the first is, with ``sampling_probability``, a token
        sampled from the previous step's output distribution instead of the reference (Chan et al.
        2016, sec. 3.3; Bengio et al. 2015): the decoder learns to continue after its own mistakes."""
        state = self.init_state(memory)
        logits, attended = [], []
        prev = tgt_in[:, 0]  # (B,) bos
        for t in range(tgt_in.size(1)):
            if t > 0:
                sampled = torch.multinomial(torch.softmax(logits[-1].detach().float(), dim=-1), 1).squeeze(1)
                use_sample = torch.rand(prev.shape, device=prev.device) < self.sampling_probability
                prev = torch.where(use_sample, sampled, tgt_in[:, t])  # (B,)
            step_logits, step_attended, state = self.step(prev, memory, state)  # (B, V), weights (B, 1, S)
            logits.append(step_logits)
            attended.append(step_attended)
        return torch.stack(logits, dim=1), AttentionOutput.cat(attended)  # (B, T, V), weights (B, T, S)

    def embed_targets(self, tgt_in: Tensor) -> Tensor:
        """Teacher forcing's inputs (B, T) -> (B, T, E), whole tokens dropped in training (``word_dropout``)."""
        return self.dropout(self.word_dropout(self.embedding(tgt_in)))

    def features(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, AttentionOutput]:
        """Pre-output features of every step (B, T, O) and their attention (weights (B, T, S)); default: a step loop."""
        embedded = self.embed_targets(tgt_in)  # (B, T, E)
        state = self.init_state(memory)
        features, attended = [], []
        for t in range(tgt_in.size(1)):
            feature, step_attended, state = self._step_features(embedded[:, t : t + 1], memory, state)
            features.append(feature)
            attended.append(step_attended)
        return torch.cat(features, dim=1), AttentionOutput.cat(attended)

    # -- helpers for subclasses -----------------------------------------------------------
    def gate(self, context: Tensor, query: Tensor) -> Tensor:
        """context (B, T, Dv) scaled by beta = sigmoid(W query) (B, T, 1) when the gate is on."""
        if self.context_gate is None:
            return context
        return torch.sigmoid(self.context_gate(query)) * context

    def run_rnn(self, inputs: Tensor, state: State) -> tuple[Tensor, State]:
        """Run the RNN over inputs (B, T, I) from the batch-first state; returns outputs (B, T, H)."""
        hidden = state["hidden"].transpose(0, 1).contiguous()  # (L, B, H)
        if self.is_lstm:
            cell = state["cell"].transpose(0, 1).contiguous()
            outputs, (hidden, cell) = self.rnn(inputs, (hidden, cell))
            return outputs, {**state, "hidden": hidden.transpose(0, 1), "cell": cell.transpose(0, 1)}
        outputs, hidden = self.rnn(inputs, hidden)
        return outputs, {**state, "hidden": hidden.transpose(0, 1)}


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean over the valid positions: values (B, S, D), mask (B, S) -> (B, D)."""
    weights = mask.unsqueeze(-1).to(values.dtype)  # (B, S, 1)
    return (values * weights).sum(1) / weights.sum(1).clamp(min=1.0)
