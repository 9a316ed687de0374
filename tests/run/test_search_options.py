"""eval.py's and predict.py's search options are spelt decoding.<name>, as train.py's (null keeps the checkpoint's
own); the spelling before, beam_size=5 at the top level, is refused with one line naming the new one."""

from __future__ import annotations

import pytest
import torch

from attend.checkpoints.saved_config import SEARCH_OPTIONS, search_overrides
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.run.evaluate import evaluate
from attend.run.predict import predict
from tests.helpers.configs import eval_config
from tests.helpers.paths import DATES

SAVED = torch.load(DATES, map_location="cpu", weights_only=False)["attend"]["config"]  # beam 3, no CTC head


def predict_config(output_dir, overrides=()):
    """predict.yaml as predict.py composes it for the dates checkpoint, its run folder ``output_dir``."""
    return compose_config([f"ckpt_path={DATES}", "plots=false", *overrides], "predict", output_dir)


def composed(name: str, tmp_path, overrides: list[str]):
    return eval_config(DATES, tmp_path, overrides) if name == "eval" else predict_config(tmp_path, overrides)


@pytest.mark.parametrize("name", ["eval", "predict"])
def test_decoding_options_set_the_checkpoints_test_search(name, tmp_path):
    assert search_overrides(composed(name, tmp_path, []), SAVED) == {}  # null: the checkpoint's own
    cfg = composed(name, tmp_path, ["decoding.beam_size=4", "decoding.length_penalty=0.5", "decoding.max_len_b=7"])
    assert search_overrides(cfg, SAVED) == {
        "model.test_search.beam_size": 4, "model.test_search.length_penalty": 0.5, "model.test_search.max_len_b": 7,
        "model.test_search._target_": "attend.search.BeamSearch",
    }
    with pytest.raises(ConfigError, match=r"^decoding.ctc_weight=0.3 decodes with a CTC head, .* none"):
        search_overrides(composed(name, tmp_path, ["decoding.ctc_weight=0.3"]), SAVED)


@pytest.mark.parametrize("name", ["eval", "predict"])
@pytest.mark.parametrize("option", sorted(SEARCH_OPTIONS))
def test_the_old_spelling_is_refused_naming_the_new_one(name, option, tmp_path):
    with pytest.raises(ConfigError) as refused:
        search_overrides(composed(name, tmp_path, [f"{option}=1"]), SAVED)
    assert f"{option}=1 is now decoding.{option}=1" in str(refused.value) and "\n" not in str(refused.value)


def test_predict_decodes_with_the_options_given_and_refuses_the_old_spelling(tmp_path, capsys):
    inputs = ["inputs=[1 Jan 2000, 12/25/07]"]
    assert all(predict(predict_config(tmp_path, inputs)))  # dates, decoded by the checkpoint's beam of 3
    # a limit of one step leaves room for the end token alone: every output is empty
    assert predict(predict_config(tmp_path, [*inputs, "decoding.max_len_a=0", "decoding.max_len_b=1"])) == ["", ""]
    with pytest.raises(ConfigError, match="max_len_b=1 is now decoding.max_len_b=1"):
        predict(predict_config(tmp_path, [*inputs, "max_len_b=1"]))


def test_eval_refuses_the_old_spelling_before_it_decodes(tmp_path):
    with pytest.raises(ConfigError, match="beam_size=2 is now decoding.beam_size=2"):
        evaluate(eval_config(DATES, tmp_path / "eval", ["beam_size=2", f"paths.cache_dir={tmp_path / 'cache'}"]))


@pytest.mark.parametrize("name", ["eval", "predict"])
def test_the_word_prior_is_set_with_its_scorer_since_older_checkpoints_have_neither(name, tmp_path):
    cfg = composed(name, tmp_path, ["decoding.word_prior_weight=0.3"])
    assert search_overrides(cfg, SAVED) == {
        "model.test_search.scorers.word_prior": {"_target_": "attend.search.WordPrior", "language": "en"},
        "model.test_search.weights.word_prior": 0.3,
    }
    cfg = composed(name, tmp_path, ["decoding.word_prior_language=fr"])  # the weight stays the checkpoint's (0)
    assert search_overrides(cfg, SAVED)["model.test_search.weights.word_prior"] == 0.0
    with pytest.raises(ConfigError, match=r"^decoding.word_prior_weight=-1 is out of range"):
        search_overrides(composed(name, tmp_path, ["decoding.word_prior_weight=-1"]), SAVED)
    greedy = {**SAVED, "model": {**SAVED["model"], "test_search": {"_target_": "attend.search.GreedySearch"}}}
    with pytest.raises(ConfigError, match="applies to beam search.*decoding.beam_size=5"):
        search_overrides(composed(name, tmp_path, ["decoding.word_prior_weight=0.3"]), greedy)
