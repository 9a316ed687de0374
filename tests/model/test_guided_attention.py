"""The guided attention loss (Tachibana et al. 2018): a diagonal prior on the attention weights."""

from __future__ import annotations

import pytest
import torch

from attend.objective import combine, guided_attention


def masks(steps: list[int], frames: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    target = torch.arange(max(steps))[None] < torch.tensor(steps)[:, None]
    source = torch.arange(max(frames))[None] < torch.tensor(frames)[:, None]
    return target, source


def test_an_alignment_on_the_diagonal_costs_little_and_one_stuck_at_the_end_costs_most():
    target, source = masks([10], [40])
    diagonal = torch.zeros(1, 10, 40)
    for t in range(10):
        diagonal[0, t, 4 * t] = 1.0
    stuck = torch.zeros(1, 10, 40)
    stuck[0, :, -1] = 1.0
    uniform = torch.full((1, 10, 40), 1 / 40)
    costs = [float(guided_attention(w, target, source, sigma=0.2)) for w in (diagonal, uniform, stuck)]
    assert costs[0] < 0.01 and costs[0] < costs[1] < costs[2] and costs[2] > 0.5


def test_padding_counts_nothing_and_the_value_is_a_mean_over_target_steps():
    target, source = masks([2, 3], [4, 6])
    weights = torch.rand(2, 3, 6).softmax(-1) * source[:, None, :]
    padded = weights.clone()
    padded[0, 2] = 5.0  # a padded step
    padded[0, :, 4:] = 7.0  # padded frames
    assert torch.equal(guided_attention(weights, target, source, 0.4), guided_attention(padded, target, source, 0.4))
    # by hand: sum over valid (t, s) of w * (1 - exp(-(s/S - t/T)^2 / (2 sigma^2))), over 5 valid steps
    total = 0.0
    for b, (steps, frames) in enumerate([(2, 4), (3, 6)]):
        for t in range(steps):
            for s in range(frames):
                total += float(weights[b, t, s]) * (1 - torch.exp(torch.tensor(-((s / frames - t / steps) ** 2)
                                                                              / (2 * 0.4**2)))).item()
    assert float(guided_attention(weights, target, source, 0.4)) == pytest.approx(total / 5, rel=1e-5)


def test_it_joins_the_attention_loss_with_its_weight_and_trains_the_weights():
    target, source = masks([4], [8])
    energies = torch.zeros(1, 4, 8, requires_grad=True)
    loss = guided_attention(energies.softmax(-1), target, source, 0.3)
    loss.backward()
    assert energies.grad.abs().sum() > 0
    parts = {"cross_entropy": torch.tensor(2.0), "guided_attention": torch.tensor(0.5), "ctc": torch.tensor(4.0)}
    assert float(combine(parts, ctc_weight=0.5, guided_weight=2.0)) == pytest.approx(0.5 * (2.0 + 1.0) + 0.5 * 4.0)
    assert float(combine(parts, ctc_weight=0.5)) == pytest.approx(0.5 * 2.0 + 0.5 * 4.0)
