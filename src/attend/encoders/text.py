"""Text encoder: embedding + bidirectional GRU/LSTM over packed sequences."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attend.layers import TokenDropout
from attend.memory import Memory, length_mask

RNN_TYPES = {"gru": nn.GRU, "lstm": nn.LSTM}


def reverse_padded(tokens: Tensor, lengths: Tensor) -> Tensor:
    """Reverse the first ``lengths[b]`` positions of each row (B, S[, D]), padding stays in place."""
    positions = torch.arange(tokens.size(1), device=tokens.device).expand(tokens.shape[:2])  # (B, S)
    reversed_positions = (lengths.unsqueeze(1) - 1 - positions).clamp(min=0)
    index = torch.where(positions < lengths.unsqueeze(1), reversed_positions, positions)  # (B, S)
    if tokens.dim() == 3:
        index = index.unsqueeze(-1).expand_as(tokens)  # (B, S, D)
    return tokens.gather(1, index)


class TextEncoder(nn.Module):
    """Embedding and a (bi)directional RNN (Bahdanau et al. 2015, sec. 3.2).

    ``reverse_source`` feeds the tokens backwards (Sutskever et al. 2014) and flips the outputs
    back, so memory position j still belongs to source token j (plots stay readable). ``dropout`` applies
    to the embeddings and, with ``output_dropout``, to the memory the decoder attends over; ``word_dropout``
    zeroes whole source tokens' embeddings (Sennrich and Zhang 2019).
    """

    modality = "text"

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        embedding_dim: int = 256,
        hidden_size: int = 256,
        num_layers: int = 1,
        rnn_type: str = "gru",
        bidirectional: bool = True,
        dropout: float = 0.1,
        reverse_source: bool = False,
        output_dropout: bool = True,
        word_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if rnn_type not in RNN_TYPES:
            raise ValueError(f"encoder.rnn_type must be one of {sorted(RNN_TYPES)}, got {rnn_type!r}")
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.word_dropout = TokenDropout(word_dropout)
        self.rnn = RNN_TYPES[rnn_type](
            embedding_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.reverse_source = reverse_source
        self.output_dropout = output_dropout
        self.output_dim = hidden_size * (2 if bidirectional else 1)

    def forward(self, src: Tensor, src_lengths: Tensor) -> Memory:
        if self.reverse_source:
            src = reverse_padded(src, src_lengths)
        embedded = self.dropout(self.word_dropout(self.embedding(src)))  # (B, S, E)
        packed = pack_padded_sequence(embedded, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, hidden = self.rnn(packed)
        values, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))  # (B, S, D)
        if self.reverse_source:
            values = reverse_padded(values, src_lengths)
        if isinstance(hidden, tuple):  # LSTM: (h, c)
            hidden = hidden[0]
        directions = 2 if self.rnn.bidirectional else 1
        final = hidden[-directions:].transpose(0, 1).reshape(src.size(0), -1)  # (B, D): top layer
        mask = length_mask(src_lengths, src.size(1))
        if self.output_dropout:
            values = self.dropout(values)
        return Memory(values=values, mask=mask, final=final)
