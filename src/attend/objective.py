"""The training objective: label-smoothed cross-entropy, the CTC term of hybrid CTC/attention, and how the
terms add up. Hard attention's REINFORCE term is its own estimator with a baseline (``attend.reinforce``); the
doubly stochastic penalty is the decoder's (``attention_penalty``)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

# what validation and test log of the objective: {stage}/{name}
LOSS_NAMES = ("loss", "attention_penalty", "guided_attention", "ctc", "reinforce")
Normalization = Literal["tokens", "sentences"]


def check_objective_options(ctc_weight: float, normalization: str) -> None:
    """Refuse options of the objective that cannot work, naming the config key."""
    if normalization not in ("tokens", "sentences"):
        raise ValueError(f"model.loss_normalization must be tokens or sentences, got {normalization!r}")
    if not 0.0 <= ctc_weight <= 1.0:
        raise ValueError(f"model.ctc_weight is a mixing weight in [0, 1], got {ctc_weight}")


def cross_entropy(
    logits: Tensor, tgt_out: Tensor, pad_id: int, label_smoothing: float, normalization: Normalization
) -> Tensor:
    """Label-smoothed cross-entropy of logits (B, T, V) against tgt_out (B, T): the mean over target tokens, or
    with ``normalization=sentences`` the sum over a sentence's tokens averaged over the batch (JoeyNMT's
    ``normalization: batch``)."""
    total = F.cross_entropy(
        logits.float().flatten(0, 1),
        tgt_out.flatten(),
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
    if normalization == "sentences":
        return total / tgt_out.size(0)
    return total / (tgt_out != pad_id).sum().clamp(min=1)


def ctc_loss(frame_logits: Tensor, frame_lengths: Tensor, tgt: Tensor, pad_id: int, bos_id: int, eos_id: int) -> Tensor:
    """CTC loss (blank = pad id) of the target ids tgt (B, T), without bos/eos, given per-frame logits (B, S, V)
    of the encoder's output; the mean over the batch of each sentence's loss per target token."""
    log_probs = torch.log_softmax(frame_logits.float(), dim=-1)  # (B, S, V)
    labels = (tgt != pad_id) & (tgt != bos_id) & (tgt != eos_id)  # (B, T)
    return F.ctc_loss(
        log_probs.transpose(0, 1),  # (S, B, V)
        tgt[labels],  # the labels of all rows, concatenated
        frame_lengths,
        labels.sum(dim=1),
        blank=pad_id,
        zero_infinity=True,  # a target longer than its frames gives no gradient instead of inf
    )


def guided_attention(weights: Tensor, target_mask: Tensor, source_mask: Tensor, sigma: float) -> Tensor:
    """The guided attention loss (Tachibana et al. 2018, eq. 1; ESPnet's GuidedAttentionLoss): the attention
    weights (B, T, S) that fall off the diagonal of each (target, source) pair, W_ts = 1 - exp(-(s/S - t/T)^2 /
    (2 sigma^2)), averaged over the target steps. 0 for an alignment on the diagonal, near 1 for one stuck at an
    end of the source; padding (target_mask (B, T), source_mask (B, S)) counts nothing."""
    steps, frames = target_mask.sum(dim=1).clamp(min=1), source_mask.sum(dim=1).clamp(min=1)  # (B,), (B,)
    t = torch.arange(weights.size(1), device=weights.device)[None, :, None] / steps[:, None, None]  # (B, T, 1)
    s = torch.arange(weights.size(2), device=weights.device)[None, None, :] / frames[:, None, None]  # (B, 1, S)
    off_diagonal = 1.0 - torch.exp(-((s - t) ** 2) / (2.0 * sigma**2))  # (B, T, S)
    valid = target_mask[:, :, None] & source_mask[:, None, :]  # (B, T, S)
    return (weights.float() * off_diagonal * valid).sum() / target_mask.sum().clamp(min=1)


def combine(losses: dict[str, Tensor], ctc_weight: float, guided_weight: float = 0.0) -> Tensor:
    """The training loss from its parts: cross-entropy + attention penalty + guided attention (times
    ``guided_weight``) + REINFORCE term, mixed with the CTC term when there is one, (1 - ctc_weight) * attention
    loss + ctc_weight * CTC (Watanabe et al. 2017)."""
    attention_loss = losses["cross_entropy"] + losses.get("attention_penalty", 0.0) + losses.get("reinforce", 0.0)
    if "guided_attention" in losses:
        attention_loss = attention_loss + guided_weight * losses["guided_attention"]
    if "ctc" not in losses:
        return attention_loss
    return (1.0 - ctc_weight) * attention_loss + ctc_weight * losses["ctc"]
