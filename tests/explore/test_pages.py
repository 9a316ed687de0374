"""The explorer's page data: the search's own numbers (predict.py's weights, the recorder's probabilities and beam),
teacher forcing that agrees with the model on its own output, each source kind, the page that carries its data
whole, and the GIF of the steps."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
import torch
from PIL import Image

from attend.checkpoints.saved_run import load_run, restore
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.data.audio.features import Spectrogram
from attend.explore import explore_batch, explorer_page, steps_animation
from attend.explore.sources import page_source
from attend.run.predict import predict
from tests.helpers.paths import DATES

SHAPES = DATES.parent / "shapes.ckpt"
SENTENCES = ["march 3 1999", "12/25/85", "the 4th of july 2001"]


@pytest.fixture(scope="module")
def dates():
    datamodule, model = restore(load_run(DATES))
    return datamodule, model


def predicted(model, batch):
    """predict.py's call: the test search, no recorder."""
    return model.decode(batch, model.test_search).result


def test_pages_show_the_weights_predict_returns_and_the_search_own_choices(dates):
    datamodule, model = dates
    batch = datamodule.batch_from_sources(SENTENCES)
    hypotheses, pages = explore_batch(model, datamodule, batch, model.test_search)
    result = predicted(model, batch)
    assert hypotheses == model.decode(batch, model.test_search).hypotheses
    for row, page in enumerate(pages):
        steps = page["modes"]["search"]
        assert len(steps) == int(result.lengths[row])  # every output step, the end token's included
        assert page["source"] == {"kind": "tokens", "tokens": datamodule.readable_source(batch, row)}
        assert "forced" not in page["modes"]
        for t, step in enumerate(steps):
            size = int(result.source_lengths[row])
            assert step["weights"] == result.weights[row, t, :size].tolist()  # exactly predict.py's numbers
            assert step["token"] == model.target_tokenizer.tokens([int(result.tokens[row, t])])[0]
            probabilities = [p for _, p in step["top"]]
            assert len(probabilities) == 5 and probabilities == sorted(probabilities, reverse=True)
            assert sum(probabilities) <= 1 + 1e-6
            chosen = [hyp for hyp in step["beam"] if hyp["chosen"]]
            assert len(chosen) == 1 and chosen[0]["tokens"] == model.target_tokenizer.tokens(result.tokens[row, :t])
            scores = [hyp["score"] for hyp in step["beam"]]
            assert scores == sorted(scores, reverse=True) and len(scores) <= model.test_search.beam_size
        assert page["search"] == f"beam search (K={model.test_search.beam_size})"


def test_teacher_forcing_on_the_model_own_output_agrees_at_every_step(dates):
    """Forced on what the search chose, the weights are the search's, and where the decoder's likeliest token is the
    one the search took (beam search may take another), the page says the model agrees."""
    datamodule, model = dates
    batch = datamodule.batch_from_sources(SENTENCES)
    outputs = model.decode(batch, model.test_search).hypotheses
    _, pages = explore_batch(model, datamodule, batch, model.test_search, references=outputs)
    for page in pages:
        search, forced = page["modes"]["search"], page["modes"]["forced"]
        assert [step["token"] for step in forced] == [step["token"] for step in search]
        for s, f in zip(search, forced, strict=True):
            np.testing.assert_allclose(f["weights"], s["weights"], atol=1e-5)
            assert f["agrees"] == (f["top"][0][0] == f["token"])
            assert f["reference_probability"] == pytest.approx(dict(s["top"]).get(s["token"], 0.0), abs=1e-5)
            np.testing.assert_allclose([p for _, p in f["top"]], [p for _, p in s["top"]], atol=1e-5)


def test_teacher_forcing_marks_where_the_reference_parts(dates):
    datamodule, model = dates
    batch = datamodule.batch_from_sources(SENTENCES[:1])
    output = model.decode(batch, model.test_search).hypotheses[0]
    other = ("0" if output[0] != "0" else "1") + output[1:]  # the reference differs at its first token
    _, pages = explore_batch(model, datamodule, batch, model.test_search, references=[other])
    forced = pages[0]["modes"]["forced"]
    assert not forced[0]["agrees"] and forced[0]["token"] == other[0] and forced[0]["model_choice"] != other[0]
    assert len(forced) == len(model.target_tokenizer.encode(other)) + 1


def test_an_image_page_places_the_weights_on_the_cells(tmp_path):
    datamodule, model = restore(load_run(SHAPES))
    path = tmp_path / "red.png"
    Image.new("RGB", (40, 30), (200, 30, 30)).save(path)
    batch = datamodule.batch_from_sources([str(path)])
    _, pages = explore_batch(model, datamodule, batch, model.test_search)
    source, result = pages[0]["source"], predicted(model, batch)
    h, w = result.grid
    assert source["kind"] == "image" and source["grid"] == [h, w] and source["picture"].startswith("data:image/png")
    picture = Image.open(io.BytesIO(base64.b64decode(source["picture"].split(",")[1])))
    assert picture.size == (source["width"], source["height"])
    for t, step in enumerate(pages[0]["modes"]["search"]):
        assert step["weights"] == result.weights[0, t].tolist() and len(step["weights"]) == h * w
    frames = Image.open(io.BytesIO(steps_animation(pages[0])))
    assert frames.n_frames == len(pages[0]["modes"]["search"])


def test_a_spectrogram_source_is_a_picture_of_its_frames():
    features = np.linspace(-3, 3, 40 * 120, dtype=np.float32).reshape(40, 120)
    source = page_source(Spectrogram(features, 0.01), None)
    assert source["kind"] == "spectrogram" and source["frames"] == 120 and source["seconds"] == pytest.approx(1.2)
    picture = Image.open(io.BytesIO(base64.b64decode(source["picture"].split(",")[1])))
    assert picture.size == (120, 40)
    assert np.asarray(picture)[-1, 0].sum() < np.asarray(picture)[0, -1].sum()  # low bins at the bottom, dark


def test_the_page_carries_its_data_whole_even_with_markup_in_tokens():
    data = {"title": "</script><b>x", "modes": {"search": [{"token": "</", "weights": [0.25, 0.75]}]}}
    page = explorer_page(data)
    embedded = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1)
    assert json.loads(embedded) == data
    assert "fetch(" not in page and "http://" not in page and "https://" not in page  # nothing fetched


def test_steps_animation_has_a_frame_per_step():
    steps = [{"weights": [0.1 * t, 1 - 0.1 * t, 0.0]} for t in range(4)]
    gif = Image.open(io.BytesIO(steps_animation({"source": {"kind": "tokens"}, "modes": {"search": steps}})))
    assert gif.n_frames == 4


def test_predict_writes_a_page_per_input(tmp_path):
    cfg = compose_config([f"ckpt_path={DATES}", "inputs=[march 3 1999,12/25/85]", "explore=true", "plots=false",
                          "references=['1999-03-03', '']"], "predict", output_dir=tmp_path)
    outputs = predict(cfg)
    pages = sorted((tmp_path / "explore").glob("input_*.html"))
    assert [page.name for page in pages] == ["input_0.html", "input_1.html"] and len(outputs) == 2
    text = pages[0].read_text(encoding="utf-8")
    data = json.loads(re.search(r'type="application/json">(.*?)</script>', text, re.S).group(1))
    assert data["output"] == outputs[0] and set(data["modes"]) == {"search", "forced"}


@pytest.mark.parametrize(("overrides", "message"), [
    (["references=['a','b','c']", "explore=true"], "references has 3 entries for 2 inputs"),
    (["references=['a','b']"], "add explore=true"),
])
def test_predict_refuses_references_it_cannot_use(tmp_path, overrides, message):
    cfg = compose_config([f"ckpt_path={DATES}", "inputs=[march 3 1999,12/25/85]", "plots=false", *overrides],
                         "predict", output_dir=tmp_path)
    with pytest.raises(ConfigError, match=message):
        predict(cfg)


def test_the_recorded_page_keeps_float32_weights_exactly(dates):
    """JSON holds each float32 weight as its exact double, so the page and predict.py agree to the bit."""
    datamodule, model = dates
    batch = datamodule.batch_from_sources(SENTENCES[:1])
    _, pages = explore_batch(model, datamodule, batch, model.test_search)
    page = explorer_page(pages[0])
    data = json.loads(re.search(r'type="application/json">(.*?)</script>', page, re.S).group(1))
    result = predicted(model, batch)
    weights = torch.tensor([step["weights"] for step in data["modes"]["search"]], dtype=torch.float32)
    assert torch.equal(weights, result.weights[0, : weights.size(0), : weights.size(1)])
