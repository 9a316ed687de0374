"""Named scorers in beam search: a scorer written here (a length bonus, a toy language model) plugs in with a weight
and changes the ranking as its weight says, without a change to the search; a weight of 0 costs nothing; the model
gives a search the outputs its scorers name (``needs``)."""

from __future__ import annotations

import math

import pytest
import torch

from attend.search import BeamSearch, GreedySearch, Scorer, ScorerState
from tests.helpers.tiny_recognizer import tiny_recognizer
from tests.helpers.toy_search import SPECIAL, ToyDecoder, eager_to_end, hashed, toy_memory


class LengthBonus(Scorer, ScorerState):
    """+1 for every token, the end token included (ESPnet's LengthBonus): no state, every token scored."""

    rises = True  # a gain above 0: the search cannot stop a sentence before its length limit

    def start(self, given, memory, beam_size, bos_id, eos_id, pad_id):
        return self

    def gains(self, candidates):
        return torch.ones(candidates.shape)


class Bigram(Scorer):
    """A toy language model that knows one sentence, 4 3: log p(next | last token), the last token its state."""

    def __init__(self):
        likely = {1: 4, 4: 3, 3: SPECIAL["eos_id"]}  # bos -> 4 -> 3 -> end
        table = torch.full((5, 5), -5.0)
        for last, following in likely.items():
            table[last, following] = 5.0
        self.table = torch.log_softmax(table, dim=-1)  # (last, next)

    def start(self, given, memory, beam_size, bos_id, eos_id, pad_id):
        return BigramState(self.table, torch.full((memory.values.size(0) * beam_size,), bos_id))


class BigramState(ScorerState):
    def __init__(self, table, last):
        self.table, self.last = table, last  # last: (N,)

    def gains(self, candidates):
        return self.table[self.last.unsqueeze(1), candidates]  # (N, C)

    def advance(self, rows, tokens, keep):
        self.last = tokens  # the extended hypotheses' last tokens, in their new rows


class Refused(Scorer):
    """Fails if the search starts it."""

    def start(self, given, memory, beam_size, bos_id, eos_id, pad_id):
        raise AssertionError("a scorer of weight 0 was started")


def test_a_length_bonus_plugs_in_and_its_weight_decides_the_length():
    """The end token (p 0.6) or 3 (p 0.4) at every step: alone, the decoder ends at once. A bonus of 1 a token
    outweighs log 0.4 = -0.92, so the longest output wins (its score counts the bonus); half that does not."""
    dec, memory = ToyDecoder(eager_to_end), toy_memory((5, 3, 1))
    limits = [7, 5, 3]  # 1.0 * source length + 2

    def search(weight):
        return BeamSearch(3, length_penalty=0.0, max_len_a=1.0, max_len_b=2, scorers={"length_bonus": LengthBonus()},
                          weights={"length_bonus": weight})

    assert BeamSearch(3, length_penalty=0.0, max_len_a=1.0, max_len_b=2)(dec, memory, **SPECIAL).sequences() == [[]] * 3
    assert search(0.5)(dec, memory, **SPECIAL).sequences() == [[]] * 3
    longest = search(1.0)(dec, memory, **SPECIAL)
    assert longest.sequences() == [[3] * (limit - 1) for limit in limits]
    expected = [(limit - 1) * math.log(0.4) + math.log(0.6) + limit for limit in limits]
    torch.testing.assert_close(longest.scores, torch.tensor(expected))


def test_a_stateful_language_model_plugs_in_and_a_large_weight_makes_it_decide():
    """The toy decoder prefers other outputs; weighted 10, the bigram model's one sentence wins in every row, its
    state following the beams as they reorder and as sentences leave the batch."""
    dec, memory = ToyDecoder(hashed), toy_memory((6, 3, 1))
    plain = BeamSearch(4, max_len_a=1.0, max_len_b=2)(dec, memory, **SPECIAL)
    fused = BeamSearch(4, max_len_a=1.0, max_len_b=2, scorers={"lm": Bigram()}, weights={"lm": 10.0})
    assert plain.sequences() != [[4, 3]] * 3
    assert fused(dec, memory, **SPECIAL).sequences() == [[4, 3]] * 3
    assert fused.weights == {"decoder": 1.0, "ctc": 0.0, "lm": 10.0} and list(fused.scorers) == ["lm"]


def test_a_scorer_of_weight_0_is_never_started_and_changes_nothing():
    dec, memory = ToyDecoder(hashed), toy_memory()
    plain = BeamSearch(3, max_len_a=1.0, max_len_b=2)(dec, memory, **SPECIAL)
    search = BeamSearch(3, max_len_a=1.0, max_len_b=2, scorers={"off": Refused()}, weights={"off": 0.0})
    assert search.scorers == {} and search.needs == ()
    result = search(dec, memory, **SPECIAL)
    assert torch.equal(result.tokens, plain.tokens) and torch.equal(result.scores, plain.scores)
    assert torch.equal(result.weights, plain.weights)


def test_scorers_and_weights_name_the_same_scorers():
    with pytest.raises(ValueError, match="must name the same scorers"):
        BeamSearch(scorers={"lm": Bigram()}, weights={})
    with pytest.raises(ValueError, match="ctc_weight sets those two"):
        BeamSearch(scorers={"ctc": Bigram()}, weights={"ctc": 0.5})


def test_a_search_names_the_model_outputs_its_scorers_read_and_the_model_gives_them():
    assert GreedySearch().needs == () and BeamSearch().needs == ()
    assert BeamSearch(ctc_weight=0.3).needs == ("ctc_log_probs",)

    class Reads(LengthBonus):
        """Keeps what each search gave it."""

        needs = "ctc_log_probs"

        def __init__(self):
            self.given = []

        def start(self, given, memory, beam_size, bos_id, eos_id, pad_id):
            self.given.append(given)
            return self

    reads = Reads()
    search = BeamSearch(2, max_len_a=0.5, max_len_b=2, scorers={"reads": reads}, weights={"reads": 0.1})
    model, batch = tiny_recognizer(0.3, search)
    model.eval()
    model.decode(batch, search)
    torch.testing.assert_close(reads.given[0], model.ctc_log_probs(model.encode(batch)))
    headless, _ = tiny_recognizer(0.0, search)  # no CTC head: the output is not given, the scorer gets None
    headless.eval().decode(batch, search)
    assert reads.given[1] is None
