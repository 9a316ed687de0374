"""Several corpora in one split: validation and test score each text metric per corpus too ({stage}/{name}/{corpus})
beside the overall figure; a single corpus adds nothing."""

from __future__ import annotations

import lightning as L
import pytest
from torch.utils.data import DataLoader

from attend.metrics import CharErrorRate
from attend.search import GreedySearch
from tests.helpers.tiny_recognizer import tiny_recognizer


def score(model, batch) -> dict:
    loader = DataLoader([batch], batch_size=None, collate_fn=lambda batch: batch)
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    return trainer.test(model, dataloaders=loader, verbose=False)[0]


def test_each_corpus_gets_its_own_text_scores():
    model, batch = tiny_recognizer(0.0, GreedySearch(max_len_a=0.5, max_len_b=2), corpora=["real", "synthetic"])
    batch["corpus"] = ["real", "synthetic"]
    tested = score(model, batch)
    model.eval()
    decoded = model.decode(batch, model.test_search)
    for row, corpus in enumerate(batch["corpus"]):
        alone = CharErrorRate()
        alone.update(decoded.text_rows([row]))
        assert tested[f"test/cer/{corpus}"] == pytest.approx(float(alone.compute()))
    overall = CharErrorRate()
    overall.update(decoded)
    assert tested["test/cer"] == pytest.approx(float(overall.compute()))


def test_one_corpus_logs_no_per_corpus_scores():
    model, batch = tiny_recognizer(0.0, GreedySearch(max_len_a=0.5, max_len_b=2))
    assert not model.corpora
    assert not any(name.count("/") > 1 for name in score(model, batch))
