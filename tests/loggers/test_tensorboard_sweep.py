"""A sweep a reviewer reads in TensorBoard: each run's folder named like its W&B run, and one HParams session per
run with the options picked (``attention: additive``), the swept ones marked, and the best validation and test
metrics as real values; read from the event files and from TensorBoard's own HParams plugin (no browser)."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata

from attend.loggers.tensorboard_run import TensorBoardLogger
from scripts.tensorboard_screenshot import running_tensorboard
from tests.helpers.entry_points import run
from tests.helpers.tiny_runs import TINY_MT

pytestmark = pytest.mark.slow  # a sweep of train.py runs: make test-slow (CI runs both tiers)

TENSORBOARD_MT = [o for o in TINY_MT if not o.startswith("logger=")] + ["logger=tensorboard"]
RUNS = {"0/tensorboard/mt-dates-rnn-additive-luong": "additive", "1/tensorboard/mt-dates-rnn-dot-luong": "dot"}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tensorboard") / "sweep"
    run("train.py", "-m", "attention=additive,dot", *TENSORBOARD_MT, f"hydra.sweep.dir={folder}")
    return folder


def events(run_folder) -> EventAccumulator:
    accumulator = EventAccumulator(str(run_folder), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def test_each_run_is_named_like_its_wandb_run_and_holds_its_hparams_session(sweep):
    folders = sorted(p.relative_to(sweep).as_posix() for p in sweep.glob("*/tensorboard/*") if p.is_dir())
    assert folders == sorted(RUNS)
    for folder, attention in RUNS.items():
        accumulator = events(sweep / folder)
        content = accumulator.PluginTagToContent(metadata.PLUGIN_NAME)
        start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
        hparams = {name: value.WhichOneof("kind") and getattr(value, value.WhichOneof("kind"))
                   for name, value in start.hparams.items()}
        assert hparams["attention"] == attention and hparams["data"] == "dates" and hparams["decoder"] == "luong"
        assert hparams["optim.optimizer.lr"] > 0 and hparams["decoder.hidden_size"] == 64  # scalar hyperparameters
        assert not any("_target_" in name or name.startswith(("callbacks", "logger", "paths")) for name in hparams)
        assert "encoder.d_model" not in hparams  # a key the RNN encoder does not have is left out

        experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
        differs = {info.name for info in experiment.hparam_infos if info.differs}
        assert differs == {"attention"}  # what the sweep varies: the HParams tab lists and ticks it first
        metrics = [info.name.tag for info in experiment.metric_infos]
        assert metrics[:2] == ["val/bleu_best", "test/bleu"] and {"test/loss", "test/chrf"} <= set(metrics)
        scalars = accumulator.Tags()["scalars"]
        assert "hp_metric" not in scalars
        for tag in metrics:  # every declared metric has a value in the session's folder
            assert math.isfinite(accumulator.Scalars(tag)[-1].value), tag
        assert accumulator.Scalars("test/loss")[-1].value > 0
        best = accumulator.Scalars("val/bleu_best")[-1].value
        assert best == pytest.approx(max(s.value for s in accumulator.Scalars("val/bleu")))
        assert accumulator.Tags()["images"]  # the attention plots


def test_tensorboard_pairs_each_session_with_its_hparams_and_metrics(sweep):
    """TensorBoard's HParams plugin, asked over HTTP as the HParams tab asks it: two sessions, each with its
    attention type and a value for every metric (what the table and parallel-coordinates views rank by)."""
    with running_tensorboard(sweep) as (port, runs):
        assert sorted(runs) == sorted(RUNS)
        experiment = ask_hparams(port, "experiment", {"experimentName": ""})
        groups = ask_hparams(port, "session_groups", {
            "startIndex": 0, "sliceSize": 10, "allowedStatuses": ["STATUS_SUCCESS"],
            "colParams": [{"hparam": "attention", "includeInResult": True}],
        })["sessionGroups"]
    assert experiment["hparamInfos"][0]["name"] == "attention" and experiment["hparamInfos"][0]["differs"]
    assert {group["name"]: group["hparams"]["attention"] for group in groups} == RUNS
    for group in groups:
        values = {metric["name"]["tag"]: metric["value"] for metric in group["metricValues"]}
        assert {"val/bleu_best", "test/bleu", "test/loss"} <= set(values)
        assert values["test/loss"] > 0


def ask_hparams(port: int, route: str, request: dict) -> dict:
    """What TensorBoard's HParams plugin answers at ``route`` (the JSON requests its tab sends)."""
    post = urllib.request.Request(
        f"http://localhost:{port}/data/plugin/hparams/{route}", data=json.dumps(request).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(post, timeout=30) as response:
        return json.load(response)


def test_the_session_holds_the_best_validation_value_and_waits_for_the_test(tmp_path):
    """Outside Hydra (no choices, no sweep): the best of ``monitor`` by its mode, no session after the fit while a
    test is to come, one after the test with the configured keys a config has."""
    logger = TensorBoardLogger(
        save_dir=tmp_path, name="tensorboard", version="", sub_dir="run", monitor="val/loss", mode="min",
        tested=True, hparam_keys=["seed", "optim.optimizer.lr", "encoder.d_model"],
    )
    logger.log_hyperparams({"seed": 7, "optim": {"optimizer": {"lr": 0.01}}, "encoder": {"hidden_size": 8}})
    logger.log_hyperparams({})  # what Lightning passes for a model without saved hyperparameters
    for step, loss in ((1, 2.0), (2, 1.5), (3, 1.7)):
        logger.log_metrics({"val/loss": loss, "epoch": step}, step=step)
    logger.finalize("success")  # the fit's end: the test is to come
    with pytest.raises(KeyError):  # no HParams data yet
        events(tmp_path / "tensorboard" / "run").PluginTagToContent(metadata.PLUGIN_NAME)
    logger.log_metrics({"test/loss": 1.6, "test/bleu": 3.0}, step=3)
    logger.finalize("success")
    accumulator = events(tmp_path / "tensorboard" / "run")
    content = accumulator.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    hparams = {name: value.number_value for name, value in start.hparams.items()}
    assert hparams == {"seed": 7, "optim.optimizer.lr": 0.01}  # encoder.d_model: not in this config
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    assert [info.name.tag for info in experiment.metric_infos] == ["val/loss_best", "test/loss", "test/bleu"]
    assert accumulator.Scalars("val/loss_best")[-1].value == 1.5
