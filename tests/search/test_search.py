import functools
import math

import pytest
import torch

from attend.attention import LocationAttention, MultiHeadAttention
from attend.decoders import BahdanauDecoder, LuongDecoder, TransformerDecoder
from attend.search import BeamSearch, GreedySearch, reorder_state
from tests.helpers.parts import additive, decoder
from tests.helpers.toy_search import SPECIAL, ToyDecoder, eager_to_end, hashed, toy_memory


def test_beam_of_one_is_greedy(memory):
    for cls in (BahdanauDecoder, LuongDecoder):
        for seed in range(3):
            dec = decoder(cls, seed)
            greedy = GreedySearch(max_len_a=1.0, max_len_b=4)(dec, memory, **SPECIAL)
            beam = BeamSearch(beam_size=1, length_penalty=0.0, max_len_a=1.0, max_len_b=4)(
                dec, memory, **SPECIAL
            )
            assert greedy.sequences() == beam.sequences()
            torch.testing.assert_close(greedy.scores, beam.scores)


def test_batched_beam_equals_one_sentence_at_a_time(memory):
    dec = decoder()
    search = BeamSearch(beam_size=4, max_len_a=1.0, max_len_b=4)
    batched = search(dec, memory, **SPECIAL)
    for i in range(3):
        alone = search(dec, memory.index_select(torch.tensor([i])), **SPECIAL)
        assert alone.sequences()[0] == batched.sequences()[i]
        torch.testing.assert_close(alone.scores[0], batched.scores[i])


def test_beam_finds_at_least_the_greedy_score(memory):
    """Without length penalty, beam search's best log-probability is never below greedy's."""
    dec = decoder(seed=1)
    greedy = GreedySearch(max_len_a=1.0, max_len_b=4)(dec, memory, **SPECIAL)
    beam = BeamSearch(beam_size=6, length_penalty=0.0, max_len_a=1.0, max_len_b=4)(dec, memory, **SPECIAL)
    assert torch.all(beam.scores >= greedy.scores - 1e-5)


def test_maximum_length_relative_to_source(memory):
    dec = decoder()
    for search in (GreedySearch(max_len_a=0.5, max_len_b=1), BeamSearch(3, max_len_a=0.5, max_len_b=1)):
        result = search(dec, memory, **SPECIAL)
        limits = (0.5 * memory.lengths.float() + 1).long()
        assert torch.all(result.lengths <= limits)
        assert result.weights.shape[:2] == result.tokens.shape and result.weights.size(2) == 7


def transformer(attention, seed=0):
    torch.manual_seed(seed)
    sizes = {"d_model": 16, "num_layers": 2, "num_heads": 2, "ff_dim": 32, "dropout": 0.0}
    return TransformerDecoder(30, 16, attention, pad_id=0, **sizes).eval()


RESCORED = {  # decoders whose beam search output is rescored with teacher forcing
    "luong": lambda: decoder(LuongDecoder, seed=2),
    "bahdanau": lambda: decoder(BahdanauDecoder, seed=2),
    "transformer-multihead": lambda: transformer(functools.partial(MultiHeadAttention, num_heads=2)),
    "transformer-additive": lambda: transformer(additive()),
    "transformer-location": lambda: transformer(
        functools.partial(LocationAttention, hidden_dim=8, channels=4, kernel_size=3)
    ),
}


@pytest.mark.parametrize("name", RESCORED)
def test_returned_weights_belong_to_the_chosen_hypothesis(memory, name):
    """Re-scoring the chosen output with teacher forcing gives the weights (per head too) and the score the
    search returned; its weights after the end token are zeros."""
    dec = RESCORED[name]()
    search = BeamSearch(beam_size=3, length_penalty=0.6, max_len_a=1.0, max_len_b=4)
    result = search(dec, memory, **SPECIAL)
    assert result.tokens.size(1) > 1  # not every output is the end token alone
    for i, tokens in enumerate(result.sequences()):
        row = memory.index_select(torch.tensor([i]))
        length = len(tokens) + 1  # the end token included
        logits, attended = dec(torch.tensor([[1] + tokens]), row)  # (1, T, V), weights (1, T, S)
        torch.testing.assert_close(result.weights[i, :length, :7], attended.weights[0], atol=1e-5, rtol=1e-4)
        assert result.weights[i, length:].abs().sum() == 0
        if attended.head_weights is not None:
            torch.testing.assert_close(
                result.head_weights[i, :, :length], attended.head_weights[0], atol=1e-5, rtol=1e-4
            )
        logp = torch.log_softmax(logits[0].float(), dim=-1).gather(1, torch.tensor([tokens + [2]]).T).sum()
        normalised = logp / search.penalty(torch.tensor(length))  # GNMT's length penalty
        assert result.scores[i].item() == pytest.approx(normalised.item(), abs=1e-4)
    assert (result.head_weights is not None) == name.endswith("multihead")


def test_reorder_state_handles_nested_states():
    state = {"hidden": torch.arange(3.0).view(3, 1), "attention": {"previous": torch.arange(6.0).view(3, 2)}}
    reordered = reorder_state(state, torch.tensor([2, 2, 0]))
    assert reordered["hidden"].flatten().tolist() == [2.0, 2.0, 0.0]
    assert reordered["attention"]["previous"][0].tolist() == [4.0, 5.0]


# -- a toy decoder whose logits are a fixed function of the prefix (helpers/toy_search.py): brute force checks it --
def brute_force(dec, row, limit, alpha, min_tokens=0):
    """The best (normalised score, tokens, weights) over every output of one sentence, with the search's
    rules: the end token only after ``min_tokens`` tokens, and forced at the length limit."""
    best = (-math.inf, None, None)

    def walk(tokens, state, score, weights):
        nonlocal best
        logits, attended, state = dec.step(torch.tensor([tokens[-1] if tokens else 1]), row, state)
        logp = torch.log_softmax(logits.float(), dim=-1)[0]
        weights = weights + [attended.weights[0, 0]]
        length = len(tokens) + 1
        if len(tokens) >= min_tokens or length >= limit:
            normalised = (score + logp[2].item()) / ((5 + length) / 6) ** alpha
            if normalised > best[0]:
                best = (normalised, tokens, torch.stack(weights))
        if length < limit:
            for token in (3, 4):
                walk(tokens + [token], state, score + logp[token].item(), weights)

    walk([], dec.init_state(row), 0.0, [])
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("min_len_ratio", [0.0, 0.6])
def test_a_wide_beam_finds_the_brute_force_optimum(alpha, min_len_ratio):
    """With room for every prefix (2 live tokens, limit 4: 12 expansions a step), beam search is exhaustive."""
    dec, memory = ToyDecoder(hashed), toy_memory()
    search = BeamSearch(12, length_penalty=alpha, max_len_a=0.5, max_len_b=2, min_len_ratio=min_len_ratio)
    result = search(dec, memory, **SPECIAL)
    for i, source_length in enumerate(memory.lengths.tolist()):
        limit = int(0.5 * source_length + 2)  # 4, 3, 2
        row = memory.index_select(torch.tensor([i]))
        score, tokens, weights = brute_force(dec, row, limit, alpha, math.ceil(min_len_ratio * source_length))
        assert result.sequences()[i] == tokens
        assert result.scores[i].item() == pytest.approx(score, abs=1e-5)
        torch.testing.assert_close(result.weights[i, : len(tokens) + 1], weights)
        assert result.weights[i, len(tokens) + 1 :].abs().sum() == 0


def short_or_long(prefix, step, memory):
    """End at once (p 0.5); or 4 then the end (p 0.3); or 3 (p 0.2), then 3 until step 9, then the end."""
    first = torch.tensor([-30.0, -30.0, math.log(0.5), math.log(0.2), math.log(0.3)])
    after_4 = torch.tensor([-30.0, -30.0, 0.0, -30.0, -30.0])
    after_3 = torch.where(step.unsqueeze(1) < 9, torch.tensor([-30.0, -30, -30, 0, -30]), after_4)  # (B, 5)
    last = prefix % 7  # (B,)
    return torch.where((last == 1).unsqueeze(1), first, torch.where((last == 4).unsqueeze(1), after_4, after_3))


def test_finished_hypotheses_do_not_crowd_out_longer_better_ones():
    """Keeping finished hypotheses in the beams, [eos] and [4, eos] filled a beam of 2 after two steps and
    search stopped; the 10 tokens of 3... score -log 5 / 2.5 = -0.64 > log 0.5 = -0.69 with alpha 1."""
    dec, memory = ToyDecoder(short_or_long), toy_memory((4,))
    result = BeamSearch(2, length_penalty=1.0, max_len_a=0.0, max_len_b=10)(dec, memory, **SPECIAL)
    assert result.lengths.tolist() == [10] and result.sequences() == [[3] * 9]
    assert result.scores.item() == pytest.approx(math.log(0.2) / 2.5, abs=1e-5)
    raw = BeamSearch(2, length_penalty=0.0, max_len_a=0.0, max_len_b=10)(dec, memory, **SPECIAL)
    assert raw.sequences() == [[]] and raw.scores.item() == pytest.approx(math.log(0.5))  # no penalty: the likeliest


def test_minimum_length_relative_to_source():
    """No end token before ceil(min_len_ratio * |source|) tokens, but never past the length limit."""
    memory = toy_memory((5, 3, 1))
    dec = ToyDecoder(eager_to_end)
    for ratio, expected in ((0.0, [0, 0, 0]), (0.5, [3, 2, 1]), (1.0, [5, 3, 1]), (9.0, [6, 4, 2])):
        search = BeamSearch(3, max_len_a=1.0, max_len_b=2, min_len_ratio=ratio)
        assert [len(tokens) for tokens in search(dec, memory, **SPECIAL).sequences()] == expected
    with pytest.raises(ValueError, match="min_len_ratio"):
        BeamSearch(min_len_ratio=-0.1)


def test_beam_of_one_stays_greedy_when_the_end_token_comes_second():
    """An end token outside the K best expansions is not kept as finished (as in fairseq): a pool that kept
    it would, with beam 1, return a prefix of greedy's output scored higher than greedy's whole."""
    dec, memory = ToyDecoder(hashed), toy_memory()
    greedy = GreedySearch(max_len_a=1.0, max_len_b=4)(dec, memory, **SPECIAL)
    beam = BeamSearch(beam_size=1, length_penalty=0.0, max_len_a=1.0, max_len_b=4)(dec, memory, **SPECIAL)
    assert greedy.sequences() == beam.sequences() == [[4, 4, 4], [4, 4, 4, 3, 3, 4], [4]]
    torch.testing.assert_close(greedy.scores, beam.scores)
    torch.testing.assert_close(greedy.weights, beam.weights)
