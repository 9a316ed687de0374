"""Audio encoder: convolutional subsampling, bidirectional RNNs and optional pyramidal layers over log-mel frames."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attend.encoders.text import RNN_TYPES
from attend.memory import Memory, length_mask


def halve(lengths: Tensor) -> Tensor:
    """Lengths after one stride-2 step (a 3x3 conv with padding 1, or a pyramid pair): ceil(L / 2)."""
    return torch.div(lengths + 1, 2, rounding_mode="floor")


class ConvSubsampling(nn.Module):
    """Stride-2 3x3 convolutions + ReLU over (time, freq), then a Linear to ``output_dim`` (ESPnet's Conv2dSubsampling).

    Every layer halves time (ceil) and frequency. Positions past each row's length are zeroed before
    every convolution, so a padded row sees exactly the zeros a conv pads an unpadded row with.
    """

    def __init__(self, input_dim: int, output_dim: int, num_layers: int, channels: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv2d(1 if i == 0 else channels, channels, 3, stride=2, padding=1) for i in range(num_layers)
        )
        freq = input_dim
        for _ in range(num_layers):
            freq = (freq + 1) // 2
        self.project = nn.Linear(channels * freq, output_dim)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """(B, N, F), (B,) -> (B, ceil(N / 2^layers), output_dim), lengths after subsampling."""
        x = features.unsqueeze(1)  # (B, 1, N, F)
        for conv in self.convs:
            x = x.masked_fill(~length_mask(lengths, x.size(2))[:, None, :, None], 0.0)  # zero the padding frames
            x = torch.relu(conv(x))  # (B, C, ceil(N/2), ceil(F/2))
            lengths = halve(lengths)
        x = x.transpose(1, 2).flatten(2)  # (B, N', C*F')
        return self.project(x), lengths  # (B, N', D)


def pair_frames(values: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """Concatenate consecutive frame pairs (Chan et al. 2016, eq. 5): (B, T, D) -> (B, ceil(T/2), 2D).

    An odd last frame is kept, paired with zeros; ``values`` must be zero past each row's length
    (as ``pad_packed_sequence`` leaves it), so a row's last pair is the same however it is padded.
    """
    if values.size(1) % 2:
        values = nn.functional.pad(values, (0, 0, 0, 1))  # (B, T+1, D)
    batch, time, dim = values.shape
    return values.reshape(batch, time // 2, 2 * dim), halve(lengths)


def run_packed(rnn: nn.RNNBase, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor | tuple[Tensor, Tensor]]:
    """A (bidirectional) RNN over the true lengths of (B, T, D): outputs (B, T, 2H), zero past each row's length,
    and the final hidden state."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    outputs, hidden = rnn(packed)
    values, _ = pad_packed_sequence(outputs, batch_first=True, total_length=x.size(1))  # (B, T, 2H)
    return values, hidden


class AudioEncoder(nn.Module):
    """Log-mel frames -> Memory: conv subsampling, bidirectional LSTM/GRU layers, pyramidal layers.

    - ``subsample_layers`` stride-2 convolutions (ESPnet's Conv2dSubsampling; 0: none, as in LAS)
      and a Linear to ``hidden_size``;
    - ``num_layers`` bidirectional RNN layers over packed sequences;
    - ``pyramid_layers`` pyramidal BiRNN layers (Listen, Attend and Spell, Chan et al. 2016, sec. 3.1),
      each reading pairs of consecutive frames concatenated (an odd last frame paired with zeros).

    Every stride-2 step keeps ceil(L / 2) frames, so an utterance of N frames gives
    ``ceil(N / time_reduction)`` memory positions, ``time_reduction = 2 ** (subsample_layers + pyramid_layers)``.
    Memory.final is the top layer's last forward state and first backward state, concatenated (B, 2H).
    Dropout applies after the conv front, between RNN layers and on the memory values.
    """

    modality = "audio"

    def __init__(
        self,
        input_dim: int,
        hidden_size: int = 128,
        num_layers: int = 2,
        rnn_type: str = "gru",
        subsample_layers: int = 2,
        conv_channels: int = 32,
        pyramid_layers: int = 0,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if rnn_type not in RNN_TYPES:
            raise ValueError(f"encoder.rnn_type must be one of {sorted(RNN_TYPES)}, got {rnn_type!r}")
        if num_layers < 1 or subsample_layers < 0 or pyramid_layers < 0:
            raise ValueError(
                "encoder.num_layers must be >= 1, encoder.subsample_layers and encoder.pyramid_layers >= 0; "
                f"got {num_layers}, {subsample_layers}, {pyramid_layers}"
            )
        rnn = RNN_TYPES[rnn_type]
        self.input_dim = input_dim
        self.subsample_layers = subsample_layers
        self.pyramid_layers = pyramid_layers
        self.subsample = (
            ConvSubsampling(input_dim, hidden_size, subsample_layers, conv_channels) if subsample_layers else None
        )
        rnn_input = hidden_size if subsample_layers else input_dim
        self.rnn = rnn(
            rnn_input,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.pyramid = nn.ModuleList(
            rnn(4 * hidden_size, hidden_size, batch_first=True, bidirectional=True) for _ in range(pyramid_layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.output_dim = 2 * hidden_size

    @property
    def time_reduction(self) -> int:
        return 2 ** (self.subsample_layers + self.pyramid_layers)

    def output_lengths(self, lengths: Tensor) -> Tensor:
        """Memory lengths for ``lengths`` input frames: ceil(lengths / time_reduction)."""
        for _ in range(self.subsample_layers + self.pyramid_layers):
            lengths = halve(lengths)
        return lengths

    def forward(self, features: Tensor, lengths: Tensor) -> Memory:
        """features (B, N, input_dim) zero- or otherwise padded, lengths (B,) frames -> Memory (B, ceil(N/r), 2H)."""
        self._check(features, lengths)
        lengths = lengths.to(features.device)
        padding = ~length_mask(lengths, features.size(1)).unsqueeze(-1)  # (B, N, 1)
        x = features.masked_fill(padding, 0.0)  # (B, N, F): padding zeroed (even NaN)
        if self.subsample is not None:
            x, lengths = self.subsample(x, lengths)  # (B, N', H)
            x = self.dropout(x)
        x, hidden = run_packed(self.rnn, x, lengths)  # (B, N', 2H)
        for rnn in self.pyramid:
            x, lengths = pair_frames(self.dropout(x), lengths)  # (B, ceil(T/2), 4H)
            x, hidden = run_packed(rnn, x, lengths)  # (B, ceil(T/2), 2H)
        if isinstance(hidden, tuple):  # LSTM: (h, c)
            hidden = hidden[0]
        final = hidden[-2:].transpose(0, 1).reshape(x.size(0), -1)  # (B, 2H): last forward, first backward
        return Memory(values=self.dropout(x), mask=length_mask(lengths, x.size(1)), final=final)

    def _check(self, features: Tensor, lengths: Tensor) -> None:
        if features.dim() != 3 or features.size(-1) != self.input_dim:
            raise ValueError(
                f"audio features must be (batch, frames, {self.input_dim}), got {tuple(features.shape)}: "
                f"data.modality.frontend.n_mels and encoder.input_dim must agree"
            )
        cpu_lengths = lengths.cpu()
        if cpu_lengths.numel() != features.size(0) or bool((cpu_lengths > features.size(1)).any()):
            raise ValueError(f"lengths {cpu_lengths.tolist()} do not fit features of shape {tuple(features.shape)}")
        if bool((cpu_lengths < 1).any()):
            raise ValueError(
                f"an utterance has {int(cpu_lengths.min())} frames; the audio encoder needs at least 1 frame "
                f"(it keeps ceil(frames / {self.time_reduction}) positions after subsampling)"
            )
