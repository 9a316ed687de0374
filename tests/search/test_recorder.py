"""The search's per-step recorder hook: a search with a recorder returns exactly what it returns without one, and the
recorder sees the search's own numbers (the chosen hypothesis's weights and log-probabilities at every step)."""

import functools
from dataclasses import fields

import pytest
import torch

from attend.attention import MultiHeadAttention
from attend.decoders import BahdanauDecoder, TransformerDecoder
from attend.search import BeamSearch, GreedySearch, SearchStep
from tests.helpers.parts import decoder
from tests.helpers.tiny_recognizer import tiny_recognizer
from tests.helpers.toy_search import SPECIAL, ToyDecoder, hashed, toy_memory


def multihead():
    torch.manual_seed(0)
    sizes = {"d_model": 16, "num_layers": 2, "num_heads": 2, "ff_dim": 32, "dropout": 0.0}
    return TransformerDecoder(30, 16, functools.partial(MultiHeadAttention, num_heads=2), pad_id=0, **sizes).eval()


DECODERS = {"bahdanau": lambda: decoder(BahdanauDecoder, seed=2), "transformer-multihead": multihead}
SEARCHES = {
    "greedy": lambda: GreedySearch(max_len_a=1.0, max_len_b=4),
    "beam": lambda: BeamSearch(beam_size=3, max_len_a=1.0, max_len_b=4),
}


def same_result(a, b) -> None:
    for field in fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        assert (torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y), field.name


def chosen_rows(steps: list[SearchStep], result, row: int):
    """For each output step of ``row``: the recorded step and the slot of the live hypothesis the output continues."""
    for t in range(int(result.lengths[row])):
        step = steps[t]
        index = int((step.sentences == row).nonzero()[0, 0])
        prefix = result.tokens[row, :t]
        slots = [k for k in range(step.history.size(1))
                 if step.scores[index, k].isfinite() and torch.equal(step.history[index, k], prefix)]
        assert slots, f"step {t}: the output's prefix is not among the live hypotheses"
        yield t, step, index, slots[0]


@pytest.mark.parametrize("search_name", SEARCHES)
@pytest.mark.parametrize("name", DECODERS)
def test_a_recorder_changes_nothing_and_sees_the_search_numbers(memory, name, search_name):
    dec, search = DECODERS[name](), SEARCHES[search_name]()
    steps: list[SearchStep] = []
    plain = search(dec, memory, **SPECIAL)
    recorded = search(dec, memory, **SPECIAL, recorder=steps.append)
    same_result(plain, recorded)
    assert len(steps) == plain.tokens.size(1) or search_name == "beam"
    assert [step.t for step in steps] == list(range(len(steps)))
    for row in range(memory.values.size(0)):
        size = int(plain.source_lengths[row])
        for t, step, index, slot in chosen_rows(steps, plain, row):
            assert torch.equal(step.weights[index, slot, :size], plain.weights[row, t, :size])
            if plain.head_weights is not None:
                assert torch.equal(step.head_weights[index, slot, :, :size], plain.head_weights[row, :, t, :size])
            token = plain.tokens[row, t]
            if search_name == "greedy" and int(token) != SPECIAL["eos_id"]:  # the pick is the argmax (the end token
                # may be forced at the length limit)
                assert int(step.log_probs[index, slot].argmax()) == int(token)
            assert step.log_probs[index, slot, token].isfinite()
        assert (steps[0].head_weights is not None) == name.endswith("multihead")


def test_recorded_log_probabilities_are_the_decoder_own():
    """On the toy decoder, whose logits are a known function of the prefix, the recorded log-probabilities are its
    log-softmax (padding and start forbidden) for each live hypothesis."""
    dec, memory = ToyDecoder(hashed), toy_memory()
    steps: list[SearchStep] = []
    BeamSearch(beam_size=2, max_len_a=1.0, max_len_b=3)(dec, memory, **SPECIAL, recorder=steps.append)
    for step in steps:
        for index, row in enumerate(step.sentences.tolist()):
            for k in range(step.history.size(1)):
                if not step.scores[index, k].isfinite():
                    continue
                prefix = 1  # the code ToyDecoder gives a prefix: bos, then each token
                for token in step.history[index, k].tolist():
                    prefix = prefix * 7 + token
                one = toy_memory().index_select(torch.tensor([row]))
                expected = torch.log_softmax(hashed(torch.tensor([prefix]), None, one), dim=-1)[0]
                expected[[0, 1]] = -torch.inf
                assert torch.equal(step.log_probs[index, k], expected)


def test_joint_ctc_beam_search_is_unchanged_by_a_recorder():
    model, batch = tiny_recognizer(0.3, BeamSearch(beam_size=3, ctc_weight=0.3, max_len_a=0.5, max_len_b=2))
    model.eval()
    steps: list[SearchStep] = []
    plain = model.decode(batch, model.test_search)
    recorded = model.decode(batch, model.test_search, recorder=steps.append)
    same_result(plain.result, recorded.result)
    assert plain.hypotheses == recorded.hypotheses and steps
