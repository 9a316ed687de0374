"""Caption metrics against their references (sacreBLEU, pycocoevalcap) and grounding on hand-made weights."""

from __future__ import annotations

import pytest
import torch
from pycocoevalcap.cider.cider import Cider
from sacrebleu.metrics import BLEU as SacreBLEU

from attend.data import WordTokenizer
from attend.metrics import CaptionBLEU, CIDErD, Decoded, Grounding, box_cells, caption_tokens
from attend.search import SearchResult

HYPOTHESES = [
    "A dog runs on the grass.",
    "two men are playing football in a park",
    "a red apple",
    "a child in a pink dress climbs the stairs",
]
REFERENCES = [
    ["A dog is running on green grass.", "The dog runs across the grass", "a brown dog plays outside"],
    ["Two men play soccer in the park.", "men playing football", "two people kick a ball on a field"],
    ["A red apple.", "an apple", "a shiny red fruit"],
    ["A child in a pink dress is climbing up stairs.", "a girl going into a building", "a little girl climbs"],
]


def sacrebleu_score(order: int) -> float:
    joined = [" ".join(caption_tokens(h)) for h in HYPOTHESES]
    streams = [[" ".join(caption_tokens(refs[k])) for refs in REFERENCES] for k in range(3)]
    return SacreBLEU(tokenize="none", max_ngram_order=order, smooth_method="none").corpus_score(joined, streams).score


@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("split", [1, 2, 4])
def test_caption_bleu_equals_sacrebleu_however_batched(order, split):
    metric = CaptionBLEU(n=order)
    for start in range(0, len(HYPOTHESES), split):
        metric.update(Decoded.text(HYPOTHESES[start : start + split], REFERENCES[start : start + split]))
    assert float(metric.compute()) == pytest.approx(sacrebleu_score(order), abs=1e-9)


def test_caption_bleu_is_zero_without_a_four_gram_and_100_for_an_exact_copy():
    metric = CaptionBLEU(n=4)
    metric.update(Decoded.text(["a dog"], [["a dog runs"]]))
    assert float(metric.compute()) == 0.0
    metric.reset()
    metric.update(Decoded.text(["A red apple on a table."], [["a red apple on a table", "something else entirely"]]))
    assert float(metric.compute()) == pytest.approx(100.0)


def test_cider_d_equals_pycocoevalcap_however_batched():
    gts = {i: [" ".join(caption_tokens(r)) for r in refs] for i, refs in enumerate(REFERENCES)}
    res = {i: [" ".join(caption_tokens(h))] for i, h in enumerate(HYPOTHESES)}
    expected, _ = Cider().compute_score(gts, res)
    metric = CIDErD()
    metric.update(Decoded.text(HYPOTHESES[:1], REFERENCES[:1]))
    metric.update(Decoded.text(HYPOTHESES[1:], REFERENCES[1:]))
    assert float(metric.compute()) == pytest.approx(100.0 * expected, rel=1e-9)
    assert float(metric.compute()) > 0


def test_cider_d_keeps_unicode_and_single_string_references():
    metric = CIDErD()
    metric.update(Decoded.text(["crème brûlée", "a cat"], ["crème brûlée", "a cat"]))
    metric.update(Decoded.text(["a dog"], ["a cat"]))
    assert float(metric.compute()) > 0


def test_box_cells_marks_the_cells_a_box_overlaps():
    cells = box_cells((0.3, 0.0, 0.55, 0.2), (4, 4)).view(4, 4)
    expected = torch.zeros(4, 4, dtype=torch.bool)
    expected[0, 1:3] = True  # x from 0.3 to 0.55 touches columns 1 and 2; y below 0.25 is row 0
    assert torch.equal(cells, expected)


def test_grounding_scores_the_object_words_on_hand_made_weights():
    tokenizer = WordTokenizer()
    tokenizer.fit(["a small red circle to the left of a large blue square"])
    words = "a small red circle to the left of a large blue square".split()
    tokens = torch.tensor([tokenizer.encode(" ".join(words)) + [tokenizer.eos_id]])  # (1, T)
    steps = tokens.size(1)
    weights = torch.full((1, steps, 4), 0.25)  # a 2x2 grid, uniform
    weights[0, words.index("circle")] = torch.tensor([0.7, 0.1, 0.1, 0.1])  # top-left: the circle
    weights[0, words.index("square")] = torch.tensor([0.6, 0.3, 0.05, 0.05])  # top-left: wrong, square is right
    objects = [[{"kind": "circle", "box": (0.0, 0.0, 0.4, 0.4)}, {"kind": "square", "box": (0.6, 0.6, 1.0, 1.0)}]]
    result = SearchResult(tokens, torch.tensor([steps]), weights, torch.zeros(1), tokenizer.eos_id, grid=(2, 2))
    pointing, mass = Grounding("pointing"), Grounding("mass")
    for metric in (pointing, mass):
        metric.update(Decoded({"objects": objects}, result, [], tokenizer))
    assert float(pointing.compute()) == pytest.approx(50.0)  # circle hit, square missed
    assert float(mass.compute()) == pytest.approx(100 * (0.7 + 0.05) / 2)


def test_grounding_skips_words_that_name_another_object_and_memories_without_grid():
    tokenizer = WordTokenizer()
    tokenizer.fit(["a circle a square"])
    tokens = torch.tensor([tokenizer.encode("a square") + [tokenizer.eos_id]])
    weights = torch.full((1, 3, 4), 0.25)
    objects = [[{"kind": "circle", "box": (0.0, 0.0, 0.5, 0.5)}, {"kind": "square", "box": (0.5, 0.5, 1.0, 1.0)}]]
    metric = Grounding("pointing")
    result = SearchResult(tokens, torch.tensor([3]), weights, torch.zeros(1), tokenizer.eos_id, grid=(2, 2))
    metric.update(Decoded({"objects": objects}, result, [], tokenizer))  # "square" matched with the circle: skipped
    without_grid = SearchResult(tokens, torch.tensor([3]), weights, torch.zeros(1), 2)
    metric.update(Decoded({"objects": objects}, without_grid, [], tokenizer))
    assert int(metric.count) == 0
