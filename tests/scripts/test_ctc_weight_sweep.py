"""scripts/ctc_weight_sweep.py's scores: CER and WER of a decoding, and each corpus's CER where a split holds several
(its whole run through train.py's checkpoint: tests/run/test_asr_entry_points.py)."""

from __future__ import annotations

from attend.metrics.base import Decoded
from scripts.ctc_weight_sweep import Scores


def decoded(hypotheses: list[str], references: list[str], corpora: list[str]) -> Decoded:
    return Decoded({"references": list(references), "corpus": corpora}, None, hypotheses)


def test_each_corpus_gets_its_own_cer_beside_the_whole_splits():
    scores = Scores(["asterisk", "amazon_queen"])
    batches = [decoded(["abcd", "wxyz"], ["abcd", "wxyy"], ["asterisk", "amazon_queen"]),
               decoded(["abcx"], ["abcd"], ["asterisk"])]
    for batch in batches:
        scores.add(lambda b: b, batch)
    row = scores.row("ctc_weight 0.3").split()
    # asterisk: 1 error in 8 characters, the game: 1 in 4, both: 2 in 12
    assert row[:2] == ["ctc_weight", "0.3"] and row[2] == "16.67"
    assert row[-2:] == ["12.50", "25.00"]


def test_one_corpus_prints_no_corpus_columns():
    scores = Scores([])
    scores.add(lambda b: b, decoded(["ab"], ["ab"], ["espeak"]))
    assert scores.row("CTC head alone").split()[3:] == ["0.00", "0.00", scores.row("x").split()[-1]]
