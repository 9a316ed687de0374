"""The validation plots with the explorer on: the PNGs and the explorer pages come from one decode of the examples,
and the pages' outputs are the plots' outputs."""

from __future__ import annotations

import functools
import json
import re
from types import SimpleNamespace

from attend.callbacks import AttentionPlots
from attend.config.compose import compose_config
from attend.explore.server import Explorer
from attend.plots import text_heatmap
from tests.helpers.paths import DATES


def test_plots_and_pages_share_one_decode(tmp_path, monkeypatch):
    explorer = Explorer(compose_config([f"ckpt_path={DATES}"], "explore"))
    model, datamodule = explorer.model, explorer.datamodule
    datamodule.setup()
    calls = []
    decode = model.decode
    monkeypatch.setattr(model, "decode", functools.wraps(decode)(lambda *a, **k: calls.append(1) or decode(*a, **k)))
    trainer = SimpleNamespace(datamodule=datamodule, loggers=[], global_step=0)
    plots = AttentionPlots(plot=text_heatmap, output_dir=str(tmp_path), num_examples=2)
    folder = plots.draw(trainer, model, "epoch_000", split="test")
    assert len(calls) == 1
    assert sorted(p.name for p in folder.iterdir()) == [
        "example_0.html", "example_0.png", "example_1.html", "example_1.png", "samples.tsv"]
    outputs = [line.split("\t")[2] for line in (folder / "samples.tsv").read_text().splitlines()[1:]]
    pages = [(folder / f"example_{i}.html").read_text() for i in range(2)]
    data = [json.loads(re.search(r'type="application/json">(.*?)</script>', page, re.S).group(1)) for page in pages]
    assert [page["output"] for page in data] == outputs
