"""Stochastic hard attention: one source position per step, trained with REINFORCE."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from attend.attention.base import Attention, AttentionOutput, require_prepared
from attend.memory import Memory


class HardAttention(Attention):
    """Xu et al. 2015, "Show, Attend and Tell", sec. 4.1: s_t ~ Multinoulli(alpha_t), z_t = a_{s_t}.

    Any soft type (``scorer``, additive by default) gives the distribution alpha_t. While training
    one position is sampled per step and its value is the context; ``log_prob`` and ``entropy`` of
    the output carry log p(s_t) and H[alpha_t] so that the model adds the REINFORCE term of eq. 12
    (``attend.reinforce.Reinforce``): the sample gets no gradient from the loss, the attention learns
    only through that term. With ``expected_context_probability`` a step instead uses the expected
    context sum_j alpha_tj a_j (the paper's 0.5; drawn per sentence and step), which gives the
    attention a direct gradient too; those steps count as not sampled (log_prob 0). At evaluation
    the weights are one-hot at argmax alpha_t: deterministic.
    """

    def __init__(
        self,
        query_dim: int,
        value_dim: int,
        scorer: Callable[..., Attention],
        expected_context_probability: float = 0.5,
    ) -> None:
        super().__init__(query_dim, value_dim)
        if not 0.0 <= expected_context_probability <= 1.0:
            raise ValueError(
                f"attention.expected_context_probability must be in [0, 1], got {expected_context_probability}"
            )
        self.scorer = scorer(query_dim=query_dim, value_dim=value_dim)
        if isinstance(self.scorer, HardAttention) or getattr(self.scorer, "num_heads", 1) > 1:
            raise ValueError(
                f"attention=hard samples one position from one distribution; its scorer must be a soft "
                f"single-head type (additive, dot, scaled_dot, general, cosine, location), got "
                f"{type(self.scorer).__name__}: set attention.scorer._target_ to one of those"
            )
        self.expected_context_probability = expected_context_probability

    @property
    def output_dim(self) -> int:
        return self.scorer.output_dim

    def prepare(self, memory: Memory) -> Memory:
        return self.scorer.prepare(memory)

    def init_state(self, memory: Memory) -> dict[str, Tensor]:
        return self.scorer.init_state(memory)

    def forward(
        self, query: Tensor, memory: Memory, state: dict[str, Tensor] | None = None
    ) -> AttentionOutput:
        require_prepared(memory)
        state = state if state else self.scorer.init_state(memory)
        if state and query.size(1) > 1:  # a stateful scorer (location) must see each step's hard choice
            return AttentionOutput.cat(self._steps(query, memory, state))
        probs = self.scorer.normalize(self.scorer.score(query, memory, state), memory.mask)  # (B, T, S)
        log_prob = entropy = None
        if self.training:
            weights, log_prob, entropy = self._sample(probs)
        else:
            weights = F.one_hot(probs.argmax(dim=-1), probs.size(-1)).to(probs.dtype)  # (B, T, S)
        context = self.scorer.read(weights, memory)  # (B, T, Dv)
        return AttentionOutput(
            context, weights, self.scorer.next_state(weights, state), log_prob=log_prob, entropy=entropy
        )

    def _steps(self, query: Tensor, memory: Memory, state: dict[str, Tensor]) -> list[AttentionOutput]:
        outputs = []
        for t in range(query.size(1)):
            outputs.append(self(query[:, t : t + 1], memory, state))
            state = outputs[-1].state
        return outputs

    def _sample(self, probs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Sampled one-hot weights (or, for some steps, the expected ones), log p(s_t) and H[alpha_t], (B, T)."""
        distribution = torch.distributions.Categorical(probs=probs.float())
        positions = distribution.sample()  # (B, T)
        log_prob = distribution.log_prob(positions)  # (B, T): differentiable in alpha
        entropy = distribution.entropy()  # (B, T)
        weights = F.one_hot(positions, probs.size(-1)).to(probs.dtype)  # (B, T, S): no gradient
        expected = torch.rand(positions.shape, device=probs.device) < self.expected_context_probability  # (B, T)
        weights = torch.where(expected.unsqueeze(-1), probs, weights)
        return weights, log_prob.masked_fill(expected, 0.0), entropy
