"""Model FLOPs of a training step of the RNN attention model, from its configured sizes, and device peaks."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from omegaconf import DictConfig

# peak dense bf16 tensor FLOP/s (no sparsity) by a substring of torch.cuda.get_device_name(), most specific first
PEAK_BF16_FLOPS = {
    "H200": 989e12,
    "H100": 989e12,
    "GH200": 989e12,
    "A100": 312e12,
    "A10G": 70e12,
    "L40S": 362e12,
    "L4": 121e12,
    "RTX 4090": 165e12,
    "RTX 3090": 71e12,
    "V100": 125e12,  # fp16 tensor cores (no bf16)
}
GATES = {"gru": 3, "lstm": 4}
# the attention classes the formula knows, by the name of their class
ATTENTION_KINDS = {
    "AdditiveAttention": "additive",
    "DotAttention": "dot",
    "ScaledDotAttention": "scaled_dot",
    "GeneralAttention": "general",
    "CosineAttention": "cosine",
    "MultiHeadAttention": "multihead",
    "LocationAttention": "location",
    "HardAttention": "hard",
}


@dataclass(frozen=True)
class ModelSizes:
    """What the FLOPs depend on: the text encoder, the RNN decoder (flow) and the attention's sizes."""

    src_vocab: int
    tgt_vocab: int
    enc_embedding: int
    enc_hidden: int
    enc_layers: int
    enc_directions: int
    enc_gates: int
    dec_embedding: int
    dec_hidden: int
    dec_layers: int
    dec_gates: int
    output_dim: int
    flow: str  # "luong" or "bahdanau"
    input_feeding: bool
    bridge: bool
    attention: str  # a value of ATTENTION_KINDS
    attention_hidden: int = 0  # A of additive and location attention; attn_dim of multi-head
    location_channels: int = 0
    location_kernel: int = 0
    location_inputs: int = 0  # 2 with cumulative weights, else 1

    @property
    def memory_dim(self) -> int:
        return self.enc_hidden * self.enc_directions


def sizes_from_config(cfg: DictConfig, src_vocab: int, tgt_vocab: int) -> ModelSizes:
    """The sizes of a composed train.yaml config with a text encoder and an RNN decoder."""
    enc, dec, att = cfg.encoder, cfg.decoder, cfg.attention
    flow = dec._target_.rsplit(".", 1)[-1]
    if flow not in ("LuongDecoder", "BahdanauDecoder"):
        raise ValueError(f"the FLOPs formula covers the RNN decoders (luong, bahdanau), not {dec._target_}")
    scorer = att.scorer if "scorer" in att else att
    kind = ATTENTION_KINDS.get(scorer._target_.rsplit(".", 1)[-1])
    if kind is None:
        raise ValueError(f"no FLOPs formula for attention {scorer._target_}; known: {sorted(ATTENTION_KINDS)}")
    hidden = scorer.get("hidden_dim") or 0
    if kind == "multihead":
        hidden = scorer.get("attn_dim") or dec.hidden_size
    return ModelSizes(
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        enc_embedding=enc.embedding_dim,
        enc_hidden=enc.hidden_size,
        enc_layers=enc.num_layers,
        enc_directions=2 if enc.bidirectional else 1,
        enc_gates=GATES[enc.rnn_type],
        dec_embedding=dec.embedding_dim,
        dec_hidden=dec.hidden_size,
        dec_layers=dec.num_layers,
        dec_gates=GATES[dec.rnn_type],
        output_dim=dec.output_dim or (dec.embedding_dim if dec.get("tie_embeddings") else dec.hidden_size),
        flow="luong" if flow == "LuongDecoder" else "bahdanau",
        input_feeding=bool(dec.get("input_feeding", False)),
        bridge=dec.init_state == "bridge",
        attention=kind,
        attention_hidden=hidden,
        location_channels=scorer.get("channels", 0),
        location_kernel=scorer.get("kernel_size", 0),
        location_inputs=2 if scorer.get("cumulative", False) else 1,
    )


def rnn_flops(tokens: int, input_size: int, hidden: int, layers: int, gates: int, directions: int = 1) -> int:
    """Matmul FLOPs of a (stacked, bi)directional RNN over ``tokens`` inputs: 2 * gates * H * (I + H) each."""
    total = 0
    for layer in range(layers):
        size = input_size if layer == 0 else hidden * directions
        total += directions * tokens * 2 * gates * hidden * (size + hidden)
    return total


def attention_flops(s: ModelSizes, src_tokens: int, steps: int, pairs: int) -> int:
    """Matmul FLOPs of ``steps`` queries over their sources (``pairs`` query-position pairs in all)."""
    dq, dv, a = s.dec_hidden, s.memory_dim, s.attention_hidden
    read = 2 * dv * pairs  # weights @ values
    if s.attention in ("dot", "scaled_dot"):
        return 2 * dv * pairs + read
    if s.attention == "general":  # W_a k once per source position, then q . (W_a k)
        return 2 * dv * dq * src_tokens + 2 * dq * pairs + read
    if s.attention == "cosine":
        keys = 2 * dv * dq * src_tokens if dq != dv else 0
        return keys + 2 * dq * pairs + read
    if s.attention == "multihead":  # W^Q, W^K, W^V, energies and read of all heads, W^O
        return 2 * dq * a * steps + 2 * 2 * dv * a * src_tokens + 2 * 2 * a * pairs + 2 * a * dv * steps
    additive = 2 * dv * a * src_tokens + 2 * dq * a * steps + 2 * a * pairs + read  # U k once, W q, v^T tanh
    if s.attention == "location":  # the convolution F and U f at every pair
        convolution = 2 * s.location_inputs * s.location_channels * s.location_kernel * pairs
        return additive + convolution + 2 * s.location_channels * a * pairs
    return additive  # additive, and hard attention's default additive scorer


def forward_flops(s: ModelSizes, src_lengths: torch.Tensor, tgt_steps: torch.Tensor) -> dict[str, int]:
    """Matmul FLOPs of one forward pass, by part, over the real (non-padding) positions.

    src_lengths (B,) source tokens; tgt_steps (B,) decoder steps (target length with bos, without eos).
    Embedding lookups are gathers (no multiply-adds): 0. Softmax, tanh and other element-wise work
    is not counted, as in the usual model-FLOPs convention.
    """
    src_tokens = int(src_lengths.sum())
    steps = int(tgt_steps.sum())
    pairs = int((src_lengths * tgt_steps).sum())
    sentences = int(src_lengths.numel())
    feed = s.memory_dim if s.flow == "bahdanau" else (s.output_dim if s.input_feeding else 0)
    combine_in = s.dec_hidden + s.memory_dim + (s.dec_embedding if s.flow == "bahdanau" else 0)
    bridges = (2 if s.dec_gates == 4 else 1) if s.bridge else 0  # an LSTM's cell gets its own bridge
    return {
        "embedding": 0,
        "encoder_rnn": rnn_flops(
            src_tokens, s.enc_embedding, s.enc_hidden, s.enc_layers, s.enc_gates, s.enc_directions
        ),
        "bridge": bridges * 2 * s.memory_dim * s.dec_layers * s.dec_hidden * sentences,
        "decoder_rnn": rnn_flops(steps, s.dec_embedding + feed, s.dec_hidden, s.dec_layers, s.dec_gates),
        "attention": attention_flops(s, src_tokens, steps, pairs),
        "combine": 2 * combine_in * s.output_dim * steps,
        "output": 2 * s.output_dim * s.tgt_vocab * steps,
    }


def training_flops(s: ModelSizes, src_lengths: torch.Tensor, tgt_steps: torch.Tensor) -> int:
    """Forward + backward: 3x the forward matmul FLOPs (backward computes two products per forward one)."""
    return 3 * sum(forward_flops(s, src_lengths, tgt_steps).values())


def peak_flops(device_name: str, override: float | None = None) -> float | None:
    """The device's peak dense bf16 FLOP/s from PEAK_BF16_FLOPS (or ``override``); None when unknown."""
    if override:
        return override
    for key, value in PEAK_BF16_FLOPS.items():
        if key.lower() in device_name.lower():
            return value
    return None
