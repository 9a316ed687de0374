"""Text metrics agree with sacreBLEU on the whole corpus, however the corpus is split into batches."""

from __future__ import annotations

import pytest
import sacrebleu

from attend.metrics import BLEU, ChrF, Decoded, ExactMatch

HYPOTHESES = [
    "The cat sat on the mat.",
    "I’m sorry, I don’t know.",
    "He was awarded the price in his absence.",
    "",
    "What's on the schedule for today?",
]
REFERENCES = [
    "The cat sat on the mat.",
    "I’m sorry, I don’t know the answer.",
    "They presented the award to him in absentia.",
    "Best wishes for the future!",
    "What's on the schedule for today?",
]


def fed_in_batches(metric, batch_size: int) -> float:
    for start in range(0, len(HYPOTHESES), batch_size):
        metric.update(Decoded.text(HYPOTHESES[start : start + batch_size], REFERENCES[start : start + batch_size]))
    return float(metric.compute())


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_chrf_equals_sacrebleu_corpus_chrf(batch_size):
    expected = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score
    assert fed_in_batches(ChrF(), batch_size) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_bleu_equals_sacrebleu_corpus_bleu(batch_size):
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert fed_in_batches(BLEU(), batch_size) == pytest.approx(expected, abs=1e-3)


def test_chrf_of_identical_text_is_100_and_reset_clears_it():
    metric = ChrF()
    metric.update(Decoded.text(["a small red circle"], ["a small red circle"]))
    assert float(metric.compute()) == pytest.approx(100.0)
    metric.reset()
    metric.update(Decoded.text(["xyz"], ["a small red circle"]))
    assert float(metric.compute()) < 5.0


def test_exact_match_counts_equal_strings_in_percent():
    assert fed_in_batches(ExactMatch(), 2) == pytest.approx(40.0)
