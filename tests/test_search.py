import torch

from attend.decoders import BahdanauDecoder, LuongDecoder
from attend.search import BeamSearch, GreedySearch, reorder_state
from tests.conftest import additive

SPECIAL = {"bos_id": 1, "eos_id": 2, "pad_id": 0}


def decoder(cls=BahdanauDecoder, seed=0):
    torch.manual_seed(seed)
    return cls(30, 16, additive(), embedding_dim=12, hidden_size=16, dropout=0.0).eval()


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


def test_returned_weights_belong_to_the_chosen_hypothesis(memory):
    """Re-scoring the chosen output with teacher forcing gives the weights the search returned."""
    dec = decoder(LuongDecoder, seed=2)
    result = BeamSearch(beam_size=3, max_len_a=1.0, max_len_b=4)(dec, memory, **SPECIAL)
    for i, tokens in enumerate(result.sequences()):
        row = memory.index_select(torch.tensor([i]))
        tgt_in = torch.tensor([[1] + tokens])
        weights = dec(tgt_in, row)[1].weights
        length = len(tokens) + 1
        torch.testing.assert_close(
            weights[0], result.weights[i, :length, : weights.size(-1)], atol=1e-5, rtol=1e-4
        )


def test_reorder_state_handles_nested_states():
    state = {"hidden": torch.arange(3.0).view(3, 1), "attention": {"previous": torch.arange(6.0).view(3, 2)}}
    reordered = reorder_state(state, torch.tensor([2, 2, 0]))
    assert reordered["hidden"].flatten().tolist() == [2.0, 2.0, 0.0]
    assert reordered["attention"]["previous"][0].tolist() == [4.0, 5.0]
