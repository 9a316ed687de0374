"""The REINFORCE term that trains stochastic hard attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attend.attention import AttentionOutput


class Reinforce(nn.Module):
    """Xu et al. 2015, "Show, Attend and Tell", eq. 12 and sec. 4.1: the attention's sampled positions
    are actions whose reward is the log-likelihood of the reference, R = log p(y | s, a).

    Loss term (minimised): -weight * (R - b) * sum_t log p(s_t) - entropy_weight * sum_t H[alpha_t],
    summed over sentences and divided by the number of target tokens, as the cross-entropy is.
    b is a moving average of R over batches (b <- decay * b + (1 - decay) * mean R), kept as a buffer
    so it is saved in checkpoints. R is computed without label smoothing and carries no gradient.
    """

    def __init__(self, weight: float = 1.0, entropy_weight: float = 0.01, baseline_decay: float = 0.9) -> None:
        super().__init__()
        if not 0.0 <= baseline_decay < 1.0:
            raise ValueError(f"model.reinforce.baseline_decay must be in [0, 1), got {baseline_decay}")
        self.weight = weight
        self.entropy_weight = entropy_weight
        self.baseline_decay = baseline_decay
        self.register_buffer("baseline", torch.zeros(()))
        self.register_buffer("started", torch.zeros((), dtype=torch.bool))

    def forward(self, logits: Tensor, tgt_out: Tensor, attended: AttentionOutput, pad_id: int) -> Tensor:
        """logits (B, T, V), tgt_out (B, T); ``attended.log_prob`` and ``.entropy`` (B, T)."""
        real = (tgt_out != pad_id).to(attended.log_prob.dtype)  # (B, T)
        token_log_likelihood = -F.cross_entropy(
            logits.detach().float().transpose(1, 2), tgt_out, ignore_index=pad_id, reduction="none"
        )  # (B, T): 0 on padding
        reward = token_log_likelihood.sum(dim=1)  # (B,)
        baseline = self._update_baseline(reward)
        sampled = (attended.log_prob * real).sum(dim=1)  # (B,): log p(s) of the real steps
        entropy = (attended.entropy * real).sum()
        tokens = real.sum().clamp(min=1.0)
        policy = -((reward - baseline) * sampled).sum()
        return (self.weight * policy - self.entropy_weight * entropy) / tokens

    def _update_baseline(self, reward: Tensor) -> Tensor:
        """The baseline before this batch (the first batch's mean starts it); updated while training."""
        mean = reward.mean().detach()
        baseline = torch.where(self.started, self.baseline, mean)
        if self.training:
            self.baseline.copy_(self.baseline_decay * baseline + (1.0 - self.baseline_decay) * mean)
            self.started.fill_(True)
        return baseline
