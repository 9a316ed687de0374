"""The explorer's pages in a real browser (headless Chromium, from the file: offline): a page of each task, and of
multi-head attention, played through every step with its own control, and the values it drew read back from the DOM
equal predict.py's weights and the search's probabilities and beam scores; an address opens a step of either mode;
an offline W&B run of experiment=dates holds the validation examples' pages as HTML media that play the same way."""

from __future__ import annotations

import json
import re

import pytest

from attend.checkpoints.saved_run import load_run, restore
from attend.data.audio import EspeakSpeech
from attend.explore import explore_batch, write_pages
from scripts.explorer_check import find_browser, open_step, page_data, tour
from tests.helpers.entry_points import run
from tests.helpers.paths import DATES, ROOT
from tests.helpers.tiny_runs import TINY_DATES

pytestmark = pytest.mark.slow

SHAPES = DATES.parent / "shapes.ckpt"
# a small espeak-ng recogniser (tests/run/test_asr_entry_points.py's) and a small Transformer with two heads
SMALL_ASR = [
    "experiment=espeak_numbers", "data.source.n_train=48", "data.source.n_val=4", "data.source.n_test=4",
    "data.loader.batch_size=8", "encoder.hidden_size=32", "decoder.hidden_size=64", "decoder.embedding_dim=16",
    "model.val_search.max_len_a=0.2", "model.test_search.max_len_a=0.2", "model.test_search.beam_size=2",
    "trainer.max_epochs=1", "trainer.limit_train_batches=3", "callbacks.attention_plots.num_examples=1", "logger=csv",
]
SMALL_TRANSFORMER = [
    "experiment=dates_transformer", "data.source.n_train=256", "data.source.n_val=8", "data.source.n_test=8",
    "encoder.d_model=32", "encoder.ff_dim=64", "decoder.d_model=32", "decoder.ff_dim=64", "attention.num_heads=2",
    "trainer.max_epochs=1", "trainer.limit_train_batches=2", "run_test=false", "logger=csv",
]


@pytest.fixture(scope="module")
def browser() -> str:
    try:
        return find_browser()
    except SystemExit as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict:
    """A checkpoint and an input of each kind of page."""
    folder = tmp_path_factory.mktemp("runs")
    run("train.py", *SMALL_ASR, f"hydra.run.dir={folder / 'asr'}")
    run("train.py", *SMALL_TRANSFORMER, f"hydra.run.dir={folder / 'transformer'}")
    image = folder / "photo.png"
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (64, 64), "white")
    ImageDraw.Draw(picture).ellipse((10, 10, 40, 40), fill="red")
    picture.save(image)
    audio = EspeakSpeech(ROOT / "data_cache", n_train=48, n_val=4, n_test=4).splits()["test"][0].path
    return {
        "mt": (DATES, "march 3 1999"),
        "caption": (SHAPES, str(image)),
        "asr": (folder / "asr" / "checkpoints" / "best.ckpt", str(audio)),
        "multihead": (folder / "transformer" / "checkpoints" / "best.ckpt", "12/25/85"),
    }


def make_page(checkpoint, source: str, folder, reference: str | None = None):
    """The page predict.py explore=true writes for ``source``, and predict.py's own result for it."""
    datamodule, model = restore(load_run(checkpoint))
    batch = datamodule.batch_from_sources([source])
    _, pages = explore_batch(model, datamodule, batch, model.test_search, [reference])
    (page,) = write_pages(pages, folder, "input")
    return page, model.decode(batch, model.test_search).result


@pytest.mark.parametrize("kind", ["mt", "caption", "asr", "multihead"])
def test_playing_a_page_shows_predict_weights_at_every_step(browser, checkpoints, kind, tmp_path):
    page, result = make_page(*checkpoints[kind], tmp_path)
    data = page_data(page)
    steps = data["modes"]["search"]
    seen = tour(browser, page, len(steps))
    length, size = int(result.lengths[0]), int(result.source_lengths[0])
    assert [step["step"] for step in seen] == list(range(length))  # every output step, in order
    for t, (drawn, step) in enumerate(zip(seen, steps, strict=True)):
        assert drawn["weights"] == result.weights[0, t, :size].tolist()  # to the bit
        if result.head_weights is not None:
            assert drawn["heads"] == result.head_weights[0, :, t, :size].tolist()
        else:
            assert drawn["heads"] == []
        assert drawn["top"] == [[token, p] for token, p in step["top"]]
        assert drawn["beam"] == [hyp["score"] for hyp in step["beam"]]
    assert (result.head_weights is not None) == (kind == "multihead")
    assert data["source"]["kind"] == {"mt": "tokens", "multihead": "tokens", "caption": "image",
                                      "asr": "spectrogram"}[kind]


def test_an_address_opens_a_step_of_either_mode(browser, tmp_path):
    page, result = make_page(DATES, "march 3 1999", tmp_path, reference="2099-03-03")
    data = page_data(page)
    last = len(data["modes"]["search"]) - 1
    drawn, _ = open_step(browser, page, last)
    assert drawn["step"] == last and drawn["weights"] == result.weights[0, last, : len(drawn["weights"])].tolist()
    forced = data["modes"]["forced"]
    for t in (0, 1):
        drawn, _ = open_step(browser, page, t, mode="forced")
        assert drawn["step"] == t and drawn["weights"] == forced[t]["weights"]
        assert drawn["agrees"] == forced[t]["agrees"]
    assert not all(step["agrees"] for step in forced)  # "2099" is not what this model writes for 1999


def test_an_offline_wandb_run_of_the_dates_experiment_holds_pages_that_play(browser, tmp_path):
    small = [o for o in TINY_DATES if not o.startswith("data=")] + ["run_test=false",
                                                                     "callbacks.attention_plots.num_examples=2"]
    run("train.py", "experiment=dates", *small, f"hydra.run.dir={tmp_path}")
    (wandb_run,) = (tmp_path / "wandb").glob("offline-run-*")
    media = sorted((wandb_run / "files" / "media" / "html").rglob("*.html"))
    saved = sorted((tmp_path / "attention" / "epoch_000").glob("example_*.html"))
    assert len(media) == 2 and len(saved) == 2
    records = next(wandb_run.glob("*.wandb")).read_bytes()
    assert b"val/explorer/example_0" in records and b"val/explorer/example_1" in records
    for page in media:
        data = page_data(page)
        assert set(data["modes"]) == {"search", "forced"}  # the example's reference, teacher-forced
        seen = tour(browser, page, len(data["modes"]["search"]))
        assert [drawn["weights"] for drawn in seen] == [step["weights"] for step in data["modes"]["search"]]
    assert json.loads(re.search(r'type="application/json">(.*?)</script>', saved[0].read_text(), re.S).group(1))
