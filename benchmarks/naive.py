"""D: a tutorial-style attention model, written the way tutorials write it, as the baseline to beat.

Bahdanau et al. 2015's flow and sizes (the same function as Attend's ``BahdanauDecoder`` with additive
attention), but in the shape of the popular tutorials (PyTorch's seq2seq translation tutorial,
bentrevett/pytorch-seq2seq, JoeyNMT's first versions): the attention concatenates the decoder state
with every encoder output and projects both again at every decoder step, the output layer and the loss
run inside the step loop, the loss is summed step by step, and ``.item()`` reads it after every batch.
Batches are drawn at random (no length bucketing).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class NaiveEncoder(nn.Module):
    """Embedding and a bidirectional GRU over packed sequences; the final states of both directions."""

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, dropout: float) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.rnn = nn.GRU(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src: Tensor, src_lengths: Tensor) -> tuple[Tensor, Tensor]:
        embedded = self.dropout(self.embedding(src))  # (B, S, E)
        packed = pack_padded_sequence(embedded, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, hidden = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))  # (B, S, 2H)
        final = torch.cat([hidden[-2], hidden[-1]], dim=1)  # (B, 2H)
        return self.dropout(outputs), final


class NaiveAttention(nn.Module):
    """e_ij = v^T tanh(W_a [s_{i-1}; h_j]): the state is repeated S times and concatenated with the
    encoder outputs, so the key half of W_a is applied again at every step (the tutorials' form)."""

    def __init__(self, hidden_size: int, memory_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.attn = nn.Linear(hidden_size + memory_dim, attention_dim)
        self.v = nn.Linear(attention_dim, 1, bias=False)

    def forward(self, hidden: Tensor, encoder_outputs: Tensor, mask: Tensor) -> Tensor:
        length = encoder_outputs.size(1)
        repeated = hidden.unsqueeze(1).repeat(1, length, 1)  # (B, S, H)
        energy = torch.tanh(self.attn(torch.cat([repeated, encoder_outputs], dim=2)))  # (B, S, A)
        scores = self.v(energy).squeeze(2).masked_fill(~mask, -1e10)  # (B, S)
        return F.softmax(scores, dim=1)  # (B, S)


class NaiveDecoder(nn.Module):
    """One step: attend with s_{i-1}, GRU on [y_{i-1}; c_i], t_i = tanh(W [s_i; c_i; y_{i-1}]), logits."""

    def __init__(
        self, vocab_size: int, embedding_dim: int, hidden_size: int, memory_dim: int, attention_dim: int,
        output_dim: int, dropout: float,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.attention = NaiveAttention(hidden_size, memory_dim, attention_dim)
        self.rnn = nn.GRU(embedding_dim + memory_dim, hidden_size, batch_first=True)
        self.combine = nn.Linear(hidden_size + memory_dim + embedding_dim, output_dim)
        self.fc_out = nn.Linear(output_dim, vocab_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, token: Tensor, hidden: Tensor, encoder_outputs: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """token (B,), hidden (B, H) -> logits (B, V), new hidden (B, H)."""
        embedded = self.dropout(self.embedding(token.unsqueeze(1)))  # (B, 1, E)
        weights = self.attention(hidden, encoder_outputs, mask)  # (B, S)
        context = torch.bmm(weights.unsqueeze(1), encoder_outputs)  # (B, 1, D)
        output, new_hidden = self.rnn(torch.cat([embedded, context], dim=2), hidden.unsqueeze(0).contiguous())
        features = torch.tanh(self.combine(torch.cat([output, context, embedded], dim=2)))  # (B, 1, O)
        return self.fc_out(self.dropout(features)).squeeze(1), new_hidden.squeeze(0)


class NaiveSeq2Seq(nn.Module):
    """Encoder, a tanh bridge from its final states to the decoder state, and the step-by-step decoder."""

    def __init__(
        self, src_vocab: int, tgt_vocab: int, embedding_dim: int, encoder_hidden: int, decoder_hidden: int,
        attention_dim: int, output_dim: int, dropout: float, pad_id: int, label_smoothing: float,
    ) -> None:
        super().__init__()
        memory_dim = 2 * encoder_hidden
        self.encoder = NaiveEncoder(src_vocab, embedding_dim, encoder_hidden, dropout)
        self.bridge = nn.Linear(memory_dim, decoder_hidden)
        self.decoder = NaiveDecoder(
            tgt_vocab, embedding_dim, decoder_hidden, memory_dim, attention_dim, output_dim, dropout
        )
        self.criterion = nn.CrossEntropyLoss(ignore_index=pad_id, label_smoothing=label_smoothing)
        self.pad_id = pad_id

    def forward(self, src: Tensor, src_lengths: Tensor, tgt: Tensor) -> Tensor:
        """The loss of teacher forcing, summed step by step and divided by the number of steps."""
        encoder_outputs, final = self.encoder(src, src_lengths)
        mask = src != self.pad_id  # (B, S)
        hidden = torch.tanh(self.bridge(final))  # (B, H)
        loss = 0.0
        steps = tgt.size(1) - 1
        for t in range(steps):
            logits, hidden = self.decoder(tgt[:, t], hidden, encoder_outputs, mask)  # (B, V)
            loss = loss + self.criterion(logits, tgt[:, t + 1])
        return loss / steps


class NaiveTrainer:
    """The tutorial's training step: zero_grad, forward, backward, clip, Adam step, ``loss.item()``."""

    def __init__(self, model: NaiveSeq2Seq, lr: float, clip: float, device: torch.device) -> None:
        self.model = model.to(device).train()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.clip = clip
        self.device = device
        self.total_loss = 0.0

    def step(self, batch: dict) -> Tensor:
        """One training step on a batch (``src``, ``src_lengths``, ``tgt``); returns the loss."""
        src, tgt = batch["src"].to(self.device), batch["tgt"].to(self.device)
        self.optimizer.zero_grad()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
            loss = self.model(src, batch["src_lengths"], tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        self.total_loss += loss.item()  # the tutorials' running total: a host synchronisation every batch
        return loss.detach()
