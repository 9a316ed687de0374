"""Stochastic hard attention (Xu et al. 2015) and the REINFORCE term that trains it."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from attend.attention import HardAttention, LocationAttention, MultiHeadAttention
from attend.decoders import BahdanauDecoder, LuongDecoder
from attend.reinforce import Reinforce
from tests.helpers.parts import additive


def hard(scorer=None, expected_context_probability=0.0):
    return functools.partial(
        HardAttention, scorer=scorer or additive(), expected_context_probability=expected_context_probability
    )


def prepared(attention, memory):
    return attention.prepare(memory)


def test_training_samples_one_valid_position_and_reports_its_log_probability(memory):
    torch.manual_seed(0)
    attention = hard()(query_dim=16, value_dim=16).train()
    mem = prepared(attention, memory)
    query = torch.randn(3, 5, 16)
    out = attention(query, mem)
    assert torch.all(out.weights.sum(-1) == 1.0) and torch.all((out.weights == 0) | (out.weights == 1))
    assert torch.all(out.weights[~mem.mask.unsqueeze(1).expand_as(out.weights)] == 0)  # never on padding
    probs = attention.scorer.normalize(attention.scorer.score(query, mem, {}), mem.mask)  # (B, T, S)
    chosen = (probs * out.weights).sum(-1)  # (B, T): alpha of the sampled position
    torch.testing.assert_close(out.log_prob, chosen.log())
    entropy = -(probs * probs.clamp(min=1e-30).log()).sum(-1)
    torch.testing.assert_close(out.entropy, entropy)
    torch.testing.assert_close(out.context, torch.bmm(out.weights, mem.values))  # the sampled value itself


def test_samples_follow_the_attention_distribution(memory):
    torch.manual_seed(0)
    attention = hard()(query_dim=16, value_dim=16).train()
    mem = prepared(attention, memory)
    query = torch.randn(3, 1, 16).expand(3, 4000, 16)
    out = attention(query, mem)
    probs = attention.scorer.normalize(attention.scorer.score(query[:, :1], mem, {}), mem.mask)[:, 0]  # (B, S)
    frequencies = out.weights.mean(dim=1)  # (B, S)
    torch.testing.assert_close(frequencies, probs, atol=0.03, rtol=0.0)


def test_expected_context_steps_are_soft_and_not_counted_as_samples(memory):
    torch.manual_seed(0)
    attention = hard(expected_context_probability=1.0)(query_dim=16, value_dim=16).train()
    mem = prepared(attention, memory)
    query = torch.randn(3, 4, 16)
    out = attention(query, mem)
    soft = attention.scorer(query, mem)
    torch.testing.assert_close(out.weights, soft.weights)
    assert torch.all(out.log_prob == 0.0)


def test_evaluation_takes_the_argmax_deterministically(memory):
    attention = hard(expected_context_probability=0.5)(query_dim=16, value_dim=16).eval()
    mem = prepared(attention, memory)
    query = torch.randn(3, 4, 16)
    first, second = attention(query, mem), attention(query, mem)
    assert torch.equal(first.weights, second.weights) and first.log_prob is None
    soft = attention.scorer(query, mem).weights
    assert torch.equal(first.weights, F.one_hot(soft.argmax(-1), soft.size(-1)).float())


def test_a_location_scorer_sees_each_hard_choice(memory):
    location = functools.partial(LocationAttention, hidden_dim=8, channels=4, kernel_size=3)
    attention = hard(scorer=location)(query_dim=16, value_dim=16).eval()
    mem = prepared(attention, memory)
    query = torch.randn(3, 4, 16)
    together = attention(query, mem, attention.init_state(mem))
    state, steps = attention.init_state(mem), []
    for t in range(4):
        out = attention(query[:, t : t + 1], mem, state)
        state = out.state
        steps.append(out.weights)
    torch.testing.assert_close(together.weights, torch.cat(steps, dim=1))
    torch.testing.assert_close(together.state["cumulative"], torch.cat(steps, dim=1).sum(1))


def test_a_multi_head_scorer_is_refused_with_the_fix():
    heads = functools.partial(MultiHeadAttention, num_heads=2)
    with pytest.raises(ValueError, match="attention.scorer._target_"):
        hard(scorer=heads)(query_dim=16, value_dim=16)


@pytest.mark.parametrize("decoder_class", [BahdanauDecoder, LuongDecoder])
def test_gradients_reach_the_attention_only_through_the_reinforce_term(memory, decoder_class):
    torch.manual_seed(0)
    decoder = decoder_class(30, 16, hard(), embedding_dim=8, hidden_size=16, dropout=0.0).train()
    assert decoder.samples_attention
    assert not decoder_class(30, 16, additive(), embedding_dim=8, hidden_size=16).samples_attention
    tgt = torch.randint(3, 30, (3, 6))
    tgt[2, 4:] = 0  # padding
    logits, attended = decoder(tgt[:, :-1], memory)
    assert attended.log_prob.shape == (3, 5) and attended.entropy.shape == (3, 5)
    scorer_parameters = list(decoder.attention.scorer.parameters())
    cross_entropy = F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=0)
    grads = torch.autograd.grad(cross_entropy, scorer_parameters, retain_graph=True, allow_unused=True)
    assert all(g is None or torch.all(g == 0) for g in grads)  # a sample passes no gradient to alpha
    term = Reinforce(weight=1.0, entropy_weight=0.01)(logits, tgt[:, 1:], attended, pad_id=0)
    grads = torch.autograd.grad(term, scorer_parameters, allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)


def test_reinforce_term_and_moving_average_baseline():
    reinforce = Reinforce(weight=1.0, entropy_weight=0.5, baseline_decay=0.9).train()
    logits = torch.zeros(2, 2, 4)  # uniform: log p = -log 4 per token
    tgt_out = torch.tensor([[1, 2], [3, 0]])  # the second sentence has one real token
    log_prob = torch.tensor([[-1.0, -2.0], [-0.5, -9.0]], requires_grad=True)
    entropy = torch.tensor([[1.0, 1.0], [1.0, 5.0]])
    attended = type("Attended", (), {"log_prob": log_prob, "entropy": entropy})()
    term = reinforce(logits, tgt_out, attended, pad_id=0)
    rewards = torch.tensor([-2.0, -1.0]) * torch.log(torch.tensor(4.0))
    baseline = rewards.mean()  # the first batch starts the baseline
    sampled = torch.tensor([-3.0, -0.5])  # padding steps do not count
    expected = (-((rewards - baseline) * sampled).sum() - 0.5 * 3.0) / 3.0
    torch.testing.assert_close(term, expected)
    torch.testing.assert_close(reinforce.baseline, baseline)
    reinforce(logits, torch.tensor([[1, 2], [3, 1]]), attended, pad_id=0)
    torch.testing.assert_close(reinforce.baseline, 0.9 * baseline + 0.1 * (-2.0 * torch.log(torch.tensor(4.0))))
    reinforce.eval()
    before = reinforce.baseline.clone()
    reinforce(logits, tgt_out, attended, pad_id=0)
    assert torch.equal(reinforce.baseline, before)  # evaluation leaves the baseline alone
