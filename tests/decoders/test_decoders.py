import pytest
import torch

from attend.attention import AdditiveAttention
from attend.decoders import BahdanauDecoder, LuongDecoder
from attend.layers import TokenDropout
from tests.helpers.parts import additive

FLOWS = {
    "bahdanau-gru": (BahdanauDecoder, {}),
    "bahdanau-lstm-2layers": (BahdanauDecoder, {"rnn_type": "lstm", "num_layers": 2}),
    "luong-feed": (LuongDecoder, {"input_feeding": True}),
    "luong-nofeed": (LuongDecoder, {"input_feeding": False}),
    "luong-lstm-nofeed-tied": (
        LuongDecoder,
        {"input_feeding": False, "rnn_type": "lstm", "tie_embeddings": True},
    ),
    # Show, Attend and Tell: LSTM with its cell from the memory, the context gate beta
    "bahdanau-lstm-gated": (BahdanauDecoder, {"rnn_type": "lstm", "context_gate": True}),
    "luong-nofeed-gated": (LuongDecoder, {"input_feeding": False, "context_gate": True}),
}


def make(name, memory_dim=16, **extra):
    cls, kwargs = FLOWS[name]
    torch.manual_seed(0)
    return cls(
        30, memory_dim, additive(), embedding_dim=12, hidden_size=16, dropout=0.0, **kwargs, **extra
    ).eval()


@pytest.mark.parametrize("name", FLOWS)
def test_forward_equals_a_loop_of_steps(name, memory):
    decoder = make(name)
    tgt_in = torch.randint(3, 30, (3, 6))
    logits, attended = decoder(tgt_in, memory)
    weights = attended.weights
    assert logits.shape == (3, 6, 30) and weights.shape == (3, 6, 7)
    prepared = decoder.prepare(memory)
    state = decoder.init_state(prepared)
    for t in range(6):
        step_logits, step_attended, state = decoder.step(tgt_in[:, t], prepared, state)
        step_weights = step_attended.weights[:, 0]
        torch.testing.assert_close(step_logits, logits[:, t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(step_weights, weights[:, t], atol=1e-6, rtol=1e-5)


def test_luong_without_feeding_uses_one_rnn_call(memory, monkeypatch):
    decoder = make("luong-nofeed")
    calls = []
    original = decoder.rnn.forward
    monkeypatch.setattr(decoder.rnn, "forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    decoder(torch.randint(3, 30, (3, 6)), memory)
    assert len(calls) == 1


@pytest.mark.parametrize("name", FLOWS)
def test_state_is_batch_first_and_returned(name, memory):
    decoder = make(name)
    state = decoder.init_state(decoder.prepare(memory))
    assert all(t.size(0) == 3 for t in state.values() if isinstance(t, torch.Tensor))
    before = {k: v.clone() for k, v in state.items() if isinstance(v, torch.Tensor)}
    decoder.step(torch.ones(3, dtype=torch.long), decoder.prepare(memory), state)
    for key, value in before.items():  # step returns a new state and leaves the old one alone
        torch.testing.assert_close(state[key], value)


def test_gradients_reach_every_parameter(memory):
    decoder = make("bahdanau-gru").train()
    logits, _ = decoder(torch.randint(3, 30, (3, 5)), memory)
    logits.sum().backward()
    for name, parameter in decoder.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_tying_needs_matching_sizes():
    with pytest.raises(ValueError, match="tie_embeddings"):
        LuongDecoder(30, 16, additive(), embedding_dim=12, hidden_size=16, output_dim=16, tie_embeddings=True)


def test_initial_state_from_mean_when_encoder_gives_no_summary(memory):
    decoder = make("bahdanau-gru")
    state = decoder.init_state(memory.replace(final=None))
    assert state["hidden"].shape == (3, 1, 16)


def test_unknown_rnn_type_is_refused():
    with pytest.raises(ValueError, match="rnn_type"):
        BahdanauDecoder(30, 16, AdditiveAttention, rnn_type="transformer")


def test_lstm_cell_starts_from_the_memory_summary(memory):
    decoder = make("bahdanau-lstm-gated")
    state = decoder.init_state(decoder.prepare(memory))
    expected = torch.tanh(decoder.cell_bridge(memory.final)).view(3, 1, 16)
    torch.testing.assert_close(state["cell"], expected)
    assert not torch.equal(state["cell"], state["hidden"])  # two projections, as in Xu et al. sec. 3.1.2


def test_context_gate_scales_the_context_by_a_sigmoid_of_the_query():
    decoder = make("bahdanau-lstm-gated")
    context, query = torch.randn(3, 1, 16), torch.randn(3, 1, 16)
    beta = torch.sigmoid(decoder.context_gate(query))  # (B, 1, 1)
    torch.testing.assert_close(decoder.gate(context, query), beta * context)
    assert make("bahdanau-gru").gate(context, query) is context  # off: untouched


def test_doubly_stochastic_penalty_by_hand():
    decoder = make("bahdanau-gru", doubly_stochastic=2.0)
    weights = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.8, 0.0], [0.9, 0.1, 0.0]]])  # (1, T=3, S=3)
    target_mask = torch.tensor([[True, True, False]])  # the third step is padding
    source_mask = torch.tensor([[True, True, False]])  # the third position is padding
    # totals over real steps: 0.7 and 1.3 -> deficits 0.09 and 0.09, summed over the 2 real positions,
    # divided by the 2 real target tokens
    penalty = decoder.attention_penalty(weights, target_mask, source_mask)
    torch.testing.assert_close(penalty, torch.tensor(2.0 * 0.18 / 2))
    assert make("bahdanau-gru").attention_penalty(weights, target_mask, source_mask) is None  # no penalty


def test_doubly_stochastic_penalty_is_per_target_token_like_the_cross_entropy():
    """Xu et al. eq. 14 per token: penalty * tokens == lambda * the per-sentence deficits summed over the batch."""
    decoder = make("bahdanau-gru", doubly_stochastic=0.7)
    generator = torch.Generator().manual_seed(3)
    weights = torch.softmax(torch.randn(4, 6, 5, generator=generator), dim=-1)  # (B, T, S)
    target_mask = torch.arange(6) < torch.tensor([6, 3, 1, 4]).unsqueeze(1)  # (B, T): 14 real tokens
    source_mask = torch.arange(5) < torch.tensor([5, 5, 2, 3]).unsqueeze(1)  # (B, S)
    deficits = [
        sum((1.0 - weights[b, : int(target_mask[b].sum()), s].sum()) ** 2 for s in range(int(source_mask[b].sum())))
        for b in range(4)
    ]
    penalty = decoder.attention_penalty(weights, target_mask, source_mask)
    torch.testing.assert_close(penalty * 14, 0.7 * sum(deficits))
    # so that cross-entropy (mean per token) + penalty = (summed NLL + lambda * summed penalty) / tokens
    logits = torch.randn(4, 6, 9, generator=generator)
    tgt_out = torch.randint(1, 9, (4, 6), generator=generator).masked_fill(~target_mask, 0)
    nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0, reduction="sum")
    mean = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0)
    torch.testing.assert_close(mean + penalty, (nll + 0.7 * sum(deficits)) / 14)


def test_penalty_gradient_reaches_the_attention(memory):
    decoder = make("bahdanau-lstm-gated", doubly_stochastic=1.0).train()
    tgt_in = torch.randint(3, 30, (3, 4))
    _, attended = decoder(tgt_in, memory)
    decoder.attention_penalty(attended.weights, tgt_in > 0, memory.mask).backward()
    assert decoder.attention.v.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("name", ["bahdanau-gru", "luong-nofeed"])
def test_target_word_dropout_acts_in_teacher_forcing_only(name, memory):
    plain, dropping = make(name), make(name, word_dropout=0.5)
    tgt_in = torch.randint(3, 30, (3, 6))
    torch.testing.assert_close(dropping(tgt_in, memory)[0], plain(tgt_in, memory)[0])  # eval: the identity
    dropping.train()
    torch.manual_seed(1)
    first = dropping(tgt_in, memory)[0]
    assert not torch.allclose(first, dropping(tgt_in, memory)[0])  # another draw drops other tokens


def test_word_dropout_off_draws_no_random_numbers_and_a_bad_rate_is_refused():
    torch.manual_seed(3)
    expected = torch.rand(1)
    torch.manual_seed(3)
    TokenDropout(0.0).train()(torch.ones(2, 3, 4))
    assert torch.equal(torch.rand(1), expected)  # fixed-seed runs without it stay bit for bit as they were
    with pytest.raises(ValueError, match=r"word_dropout must be in \[0, 1\)"):
        TokenDropout(1.0)
