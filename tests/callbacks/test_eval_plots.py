"""eval.py's attention plots: num_plots examples of the test split, none with num_plots=0 (the training callback's
num_examples=0 alike)."""

from __future__ import annotations

import json

from attend.callbacks import AttentionPlots
from attend.run.evaluate import evaluate
from tests.helpers.configs import eval_config
from tests.helpers.paths import DATES


def test_num_plots_0_writes_the_metrics_and_no_plots(tmp_path, capsys):
    cfg = eval_config(DATES, tmp_path / "eval", ["num_plots=0", f"paths.cache_dir={tmp_path / 'cache'}"])
    metrics = evaluate(cfg)
    assert json.loads((tmp_path / "eval" / "test_metrics.json").read_text()) == metrics
    assert not (tmp_path / "eval" / "attention").exists()
    assert "attention plots" not in capsys.readouterr().out


def test_num_plots_draws_that_many_test_examples(tmp_path, capsys):
    evaluate(eval_config(DATES, tmp_path / "eval", ["num_plots=2", f"paths.cache_dir={tmp_path / 'cache'}"]))
    assert sorted(p.name for p in (tmp_path / "eval" / "attention" / "test").glob("*.png")) == [
        "example_0.png", "example_1.png"]
    assert "attention plots: " in capsys.readouterr().out


def test_the_callback_with_no_examples_draws_nothing_and_reads_no_data(tmp_path):
    plots = AttentionPlots(plot=print, output_dir=str(tmp_path), num_examples=0)
    assert plots.draw(trainer=None, pl_module=None, name="epoch_000") is None  # no data module needed
    assert not (tmp_path / "attention").exists()
