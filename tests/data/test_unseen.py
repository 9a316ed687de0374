"""Evaluation examples whose references never occur in training (``unseen``), and metrics on those only."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from attend.config.compose import compose_config
from attend.data import WordTokenizer
from attend.data.images import ShapeScenes, TuxPaintStamps
from attend.data.images.tuxpaint import TUXPAINT_STAMPS
from attend.data.unseen import caption_set, is_unseen
from attend.metrics import CaptionBLEU, CIDErD, Decoded, UnseenOnly
from attend.search import SearchResult
from tests.helpers.datamodules import caption_datamodule

HYPOTHESES = ["a red circle", "a blue square above a circle", "a cat", "a small dog on a mat", "a green square"]
REFERENCES = [["a red circle"], ["a blue square above a green circle"], ["a cat sat"], ["a dog on a mat"], ["a square"]]
UNSEEN = [True, False, True, True, False]


def tokenizer() -> WordTokenizer:
    words = WordTokenizer(lowercase=True)
    words.fit(HYPOTHESES)
    return words


def decoded(words: WordTokenizer, rows: list[int], with_unseen: bool = True) -> Decoded:
    """The rows of the examples above as the model decodes them: the batch, a search result and its hypotheses."""
    ids = [words.encode(HYPOTHESES[i]) + [words.eos_id] for i in rows]
    width = max(len(i) for i in ids)
    tokens = torch.tensor([i + [words.pad_id] * (width - len(i)) for i in ids])  # (B, T)
    lengths = torch.tensor([len(i) for i in ids])
    weights = torch.full((len(rows), width, 4), 0.25)  # (B, T, S)
    result = SearchResult(tokens, lengths, weights, torch.zeros(len(rows)), words.eos_id)
    batch = {"references": [REFERENCES[i] for i in rows]}
    if with_unseen:
        batch["unseen"] = torch.tensor([UNSEEN[i] for i in rows])
    return Decoded(batch, result, [words.decode(ids) for ids in result.sequences()], words)


def filtered(metric, rows: list[int]):
    """The wrapped metric updated directly with the unseen ones of ``rows``."""
    kept = [i for i in rows if UNSEEN[i]]
    metric.update(Decoded.text([HYPOTHESES[i] for i in kept], [REFERENCES[i] for i in kept]))
    return metric.compute()


# marking examples --------------------------------------------------------------------------------
def test_an_example_is_unseen_when_no_reference_occurs_after_normalisation() -> None:
    training = caption_set(["A red circle.", "a blue, square"])
    assert not is_unseen(["a Red circle"], training)  # case and punctuation do not count
    assert not is_unseen(["something else", "A blue square!"], training)  # any one reference seen is enough
    assert is_unseen(["a red circle above"], training)


def test_caption_batches_say_which_evaluation_examples_are_unseen(tmp_path: Path) -> None:
    source = ShapeScenes(n_train=60, n_val=20, n_test=20, image_size=32)
    dm = caption_datamodule(source, WordTokenizer(lowercase=True), image_size=32, eval_batch_size=50)
    dm.setup("fit")
    training = caption_set(c for r in source.splits()["train"] for c in r.captions)
    for split in ("val", "test"):
        batch = next(iter(dm.val_dataloader() if split == "val" else dm.test_dataloader()))
        assert batch["unseen"].dtype == torch.bool
        assert batch["unseen"].tolist() == [is_unseen(refs, training) for refs in batch["references"]]
        assert 0 < int(batch["unseen"].sum()) < len(batch["references"])
    assert "unseen" not in next(iter(dm.train_dataloader()))


def seen_counts(source) -> dict[str, tuple[int, int]]:
    splits = source.splits()
    training = caption_set(c for r in splits["train"] for c in r.captions)
    return {s: (sum(not is_unseen(r.captions, training) for r in splits[s]), len(splits[s])) for s in ("val", "test")}


def test_shape_scene_captions_seen_in_training() -> None:
    counts = seen_counts(ShapeScenes(n_train=4000, n_val=300, n_test=300, image_size=64, max_objects=3, seed=1234))
    assert counts == {"val": (153, 300), "test": (166, 300)}  # data=shapes: more than half the test set


@pytest.mark.skipif(not Path(TUXPAINT_STAMPS).is_dir(), reason="Debian package tuxpaint-stamps-default not installed")
def test_tux_paint_captions_seen_in_training() -> None:
    assert seen_counts(TuxPaintStamps()) == {"val": (27, 100), "test": (29, 120)}


# the metric --------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: CaptionBLEU(n=2), CIDErD], ids=["bleu2", "cider"])
def test_unseen_only_equals_the_wrapped_metric_on_the_unseen_rows(make) -> None:
    words = tokenizer()
    metric = UnseenOnly(make())
    for rows in ([0, 1], [2, 3, 4]):
        metric.update(decoded(words, rows))
    assert float(metric.compute()) == pytest.approx(float(filtered(make(), [0, 1, 2, 3, 4])))
    assert float(metric.compute()) != pytest.approx(float(filtered(make(), [])))  # something was counted
    clone = metric.clone()
    metric.reset()
    assert float(clone.compute()) > 0  # a clone keeps its own wrapped states
    metric.update(decoded(words, [3, 4]))
    assert float(metric.compute()) == pytest.approx(float(filtered(make(), [3, 4])))  # reset reached the wrapped


@pytest.mark.parametrize("make", [lambda: CaptionBLEU(n=4), CIDErD], ids=["bleu4", "cider"])
def test_batches_without_unseen_count_nothing_and_give_zero(make) -> None:
    words = tokenizer()
    metric = UnseenOnly(make())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "compute before update" warning either
        metric.update(decoded(words, [0, 2], with_unseen=False))
        metric.update(decoded(words, [1, 4]))  # only seen rows
        value = metric.compute()
    assert torch.isfinite(value) and float(value) == 0.0


def test_caption_task_logs_bleu4_and_cider_on_unseen_images(tmp_path) -> None:
    cfg = compose_config(["task=caption", "data=shapes"], output_dir=tmp_path)
    for name, wrapped in (("bleu4_unseen", CaptionBLEU), ("cider_unseen", CIDErD)):
        metric = instantiate(cfg.model.metrics[name])
        assert isinstance(metric, UnseenOnly) and isinstance(metric.metric, wrapped)
    assert instantiate(cfg.model.metrics.bleu4_unseen).metric.n == 4


# under DDP (ranks with and without unseen rows, uneven shares): tests/metrics/test_caption_ddp.py
