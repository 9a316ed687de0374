"""What every decoder declares to the model besides the Decoder contract: sampled attention and its penalty."""

from __future__ import annotations

from torch import Tensor, nn

from attend.attention import HardAttention


class Decoder(nn.Module):
    """The base of both decoder families. The model asks it, never its type, whether the attention samples
    positions (``samples_attention``: the REINFORCE term is then kept) and what attention penalty to add
    (``attention_penalty``: None when there is none, and nothing is logged)."""

    doubly_stochastic: float  # lambda of Xu et al. 2015 eq. 14; 0: no penalty (each subclass sets it)

    @property
    def samples_attention(self) -> bool:
        """Whether any attention in the decoder samples positions while training (needs the REINFORCE term)."""
        return any(isinstance(module, HardAttention) for module in self.modules())

    def attention_penalty(self, weights: Tensor, target_mask: Tensor, source_mask: Tensor) -> Tensor | None:
        """Doubly stochastic regularisation, Xu et al. 2015 eq. 14, per target token like the cross-entropy;
        None when ``doubly_stochastic`` is 0.

        weights (B, T, S) of teacher forcing (the Transformer's: its last layer's); target_mask (B, T) marks
        real output steps (the end token included, as the cross-entropy counts them) and source_mask (B, S)
        real positions. Each sentence's penalty sum_i (1 - sum_t alpha_ti)^2 is summed over its positions as
        in the paper (and its code); lambda times their sum over the batch is divided by the batch's target
        tokens, so cross-entropy (a mean per token) + penalty = (sum NLL + lambda * sum penalty) / tokens:
        the paper's objective per token, with the paper's lambda (1). The penalty grows with the number of
        positions: with 64 cells and 10 words about 45 a sentence.
        """
        if not self.doubly_stochastic:
            return None
        totals = (weights * target_mask.unsqueeze(-1).to(weights.dtype)).sum(dim=1)  # (B, S)
        deficit = ((1.0 - totals) ** 2 * source_mask.to(weights.dtype)).sum(dim=1)  # (B,)
        tokens = target_mask.sum().clamp(min=1)  # real target tokens of the batch, as the cross-entropy's mean
        return self.doubly_stochastic * deficit.sum() / tokens
