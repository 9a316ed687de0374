"""Transformer encoder: a stem for the data's modality, then pre-norm self-attention layers."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attend.attention.self_attention import SelfAttention
from attend.encoders.audio import ConvSubsampling
from attend.encoders.image_cnn import CNNEncoder
from attend.layers import FeedForward, Positions
from attend.memory import Memory, length_mask


class GridPositions(nn.Module):
    """2-D positions of an image grid: half the channels encode the row, half the column
    (Parmar et al. 2018, "Image Transformer", sec. 3.1; Carion et al. 2020, DETR)."""

    def __init__(self, dim: int, kind: str = "sinusoidal", max_positions: int = 1024) -> None:
        super().__init__()
        self.rows = Positions(dim // 2, kind, max_positions)
        self.columns = Positions(dim - dim // 2, kind, max_positions)

    def forward(self, height: int, width: int, like: Tensor) -> Tensor:
        """(H*W, dim), row-major: cell (i, j) is [row_i; column_j]."""
        rows = self.rows(0, height, like).unsqueeze(1).expand(-1, width, -1)  # (H, W, dim / 2)
        columns = self.columns(0, width, like).unsqueeze(0).expand(height, -1, -1)  # (H, W, dim / 2)
        return torch.cat([rows, columns], dim=-1).flatten(0, 1)  # (H*W, dim)


class EncoderLayer(nn.Module):
    """A pre-norm Transformer layer (Xiong et al. 2020, "On Layer Normalization in the Transformer
    Architecture"): x + SelfAttention(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, d_model: int, num_heads: int, ff_dim: int, dropout: float) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(d_model)
        self.attention = SelfAttention(d_model, num_heads, dropout)
        self.ff_norm = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, ff_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """x (B, S, D), mask (B, S) True on real positions (None: all real) -> (B, S, D)."""
        x = x + self.dropout(self.attention(self.attention_norm(x), mask))  # (B, S, D)
        return x + self.dropout(self.feed_forward(self.ff_norm(x)))  # (B, S, D)


class TokenStem(nn.Module):
    """Token embeddings times sqrt(d_model) plus 1-D positions (Vaswani et al. 2017, secs. 3.4-3.5)."""

    def __init__(self, vocab_size: int, pad_id: int, d_model: int, positions: str, max_positions: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)  # fairseq: unit scale after the sqrt(d)
        nn.init.zeros_(self.embedding.weight[pad_id])
        self.scale = math.sqrt(d_model)
        self.positions = Positions(d_model, positions, max_positions)

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, None]:
        """Token ids (B, S), lengths (B,) -> (B, S, D), mask (B, S), no grid."""
        x = self.embedding(src) * self.scale + self.positions(0, src.size(1), self.embedding.weight)  # (B, S, D)
        return x, length_mask(lengths.to(src.device), src.size(1)), None


class AudioStem(nn.Module):
    """Log-mel frames through ESPnet's convolutional subsampling (``subsample_layers`` stride-2
    convolutions: ceil(N / 2^layers) frames; 0: a Linear per frame) to d_model, plus 1-D positions."""

    def __init__(
        self, input_dim: int, d_model: int, subsample_layers: int, channels: int, positions: str, max_positions: int
    ) -> None:
        super().__init__()
        self.input_dim = input_dim
        self.subsample = ConvSubsampling(input_dim, d_model, subsample_layers, channels) if subsample_layers else None
        self.project = nn.Linear(input_dim, d_model) if subsample_layers == 0 else None
        self.positions = Positions(d_model, positions, max_positions)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, None]:
        """features (B, N, F), lengths (B,) frames -> (B, N', D), mask (B, N'), no grid."""
        if features.dim() != 3 or features.size(-1) != self.input_dim:
            raise ValueError(
                f"audio features must be (batch, frames, {self.input_dim}), got {tuple(features.shape)}: "
                f"data.modality.frontend.n_mels and encoder.input_dim must agree"
            )
        if bool((lengths < 1).any()):
            raise ValueError(f"an utterance has {int(lengths.min())} frames; the transformer encoder needs at least 1")
        lengths = lengths.to(features.device)
        x = features.masked_fill(~length_mask(lengths, features.size(1)).unsqueeze(-1), 0.0)  # (B, N, F)
        if self.subsample is not None:
            x, lengths = self.subsample(x, lengths)  # (B, N', D)
        else:
            x = self.project(x)  # (B, N, D)
        x = x + self.positions(0, x.size(1), x)  # (B, N', D)
        return x, length_mask(lengths, x.size(1)), None


class ImageStem(nn.Module):
    """The convolutional blocks of ``CNNEncoder`` mapped to d_model per cell, plus 2-D positions."""

    def __init__(self, channels: list[int] | tuple[int, ...], d_model: int, positions: str, max_positions: int) -> None:
        super().__init__()
        self.cnn = CNNEncoder(channels, output_dim=d_model, coordinates=False, dropout=0.0)
        self.positions = GridPositions(d_model, positions, max_positions)

    def forward(self, images: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor, tuple[int, int]]:
        """images (B, 3, H, W) -> cells (B, h*w, D), mask (B, h*w), grid (h, w)."""
        cells = self.cnn(images)  # values (B, h*w, D), grid (h, w)
        x = cells.values + self.positions(*cells.grid, cells.values)  # (B, h*w, D)
        return x, cells.mask, cells.grid


class TransformerEncoder(nn.Module):
    """Vaswani et al. 2017, sec. 3.1, with pre-norm layers (Xiong et al. 2020) and a final LayerNorm.

    It reads any modality (class attribute ``modality = None``: the builder's modality check lets it pass,
    and the builder gives it the data module's ``modality``); the stem is the one of that modality:
    ``text`` token embeddings (``vocab_size``, ``pad_id``) and 1-D positions; ``audio`` the convolutional
    subsampling of the audio encoder over ``input_dim`` (n_mels) features and 1-D positions; ``image``
    the CNN blocks of the image encoder over an (h, w) grid with 2-D positions, ``Memory.grid = (h, w)``.
    Memory.final is the mean of the real positions.
    """

    modality = None

    def __init__(
        self,
        modality: str,
        vocab_size: int | None = None,
        pad_id: int = 0,
        input_dim: int | None = None,
        d_model: int = 256,
        num_layers: int = 3,
        num_heads: int = 4,
        ff_dim: int = 1024,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
        max_positions: int = 1024,
        channels: list[int] | tuple[int, ...] = (16, 32, 64),
        subsample_layers: int = 2,
        conv_channels: int = 32,
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"encoder.num_heads must divide encoder.d_model, got {num_heads} and {d_model}")
        match modality:
            case "text":
                vocab_size = data_size(vocab_size, "vocab_size", modality)
                self.stem = TokenStem(vocab_size, pad_id, d_model, positions, max_positions)
            case "audio":
                input_dim = data_size(input_dim, "input_dim", modality)
                self.stem = AudioStem(input_dim, d_model, subsample_layers, conv_channels, positions, max_positions)
            case "image":
                self.stem = ImageStem(channels, d_model, positions, max_positions)
            case _:
                raise ValueError(
                    f"the transformer encoder reads text, image or audio; the data module's modality is {modality!r}"
                )
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, ff_dim, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.output_dim = d_model

    def forward(self, src: Tensor, lengths: Tensor | None = None) -> Memory:
        """Token ids (B, S), log-mel frames (B, N, F) or images (B, 3, H, W) -> Memory (B, S', d_model)."""
        x, mask, grid = self.stem(src, lengths)  # (B, S', D), (B, S')
        x = self.dropout(x)
        key_mask = None if grid is not None else mask  # image cells are never padding: the fused kernel needs no mask
        for layer in self.layers:
            x = layer(x, key_mask)  # (B, S', D)
        x = self.norm(x).masked_fill(~mask.unsqueeze(-1), 0.0)  # (B, S', D): zero on padding
        real = mask.unsqueeze(-1).to(x.dtype)  # (B, S', 1)
        final = (x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)  # (B, D)
        return Memory(values=x, mask=mask, grid=grid, final=final)


def data_size(value: int | None, name: str, modality: str) -> int:
    """``value``, which the data module gives the encoder (``encoder_kwargs()``): an error naming it when missing."""
    if value is None:
        raise ValueError(
            f"the transformer encoder reads {modality} here and needs {name}, which the {modality} data module "
            f"gives (its encoder_kwargs()); none was given"
        )
    return value
