"""Checkpoints written by earlier code still evaluate to the metrics they had, and the tokenizers are found in
every checkpoint: in the data module's state (saved by Lightning) or, in older ones, the model's copy."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from attend.checkpoints.saved_run import datamodule_state, load_checkpoint
from attend.config.errors import ConfigError
from attend.decoders import LuongDecoder
from attend.encoders import TextEncoder
from attend.model import Seq2Seq
from attend.run.evaluate import evaluate
from tests.helpers.configs import eval_config
from tests.helpers.parts import additive
from tests.helpers.paths import FIXTURES

OLD_CHECKPOINTS = FIXTURES / "old_checkpoints"  # how and why they were made: README.md there
TEXT_STATE = {"src_tokenizer": {"kind": "char"}, "tgt_tokenizer": {"kind": "char"}}


def with_cache_dir(fixture: Path, cache_dir: Path, folder: Path) -> Path:
    """A copy of the fixture whose saved config prepares its data under ``cache_dir``: the saved one is a folder
    of the machine that trained it. Nothing else changes."""
    checkpoint = torch.load(fixture, map_location="cpu", weights_only=False)
    config = checkpoint["attend"]["config"]
    config["paths"]["cache_dir"] = config["data"]["cache_dir"] = str(cache_dir)
    path = folder / fixture.name
    torch.save(checkpoint, path)
    return path


def assert_metrics_equal(evaluated: dict, expected: dict) -> None:
    assert set(evaluated) == set(expected)
    for name, value in expected.items():
        if isinstance(value, int):  # a count
            assert evaluated[name] == value, (name, evaluated[name], value)
        else:
            assert math.isclose(evaluated[name], value, rel_tol=0.0, abs_tol=1e-6), (name, evaluated[name], value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dates", "shapes"])
def test_an_old_checkpoint_evaluates_to_its_recorded_metrics(name, tmp_path):
    fixture = OLD_CHECKPOINTS / f"{name}.ckpt"
    checkpoint = torch.load(fixture, map_location="cpu", weights_only=False)
    assert "tokenizers" in checkpoint["attend"]  # written by the model, as the code before the change did
    ckpt_path = with_cache_dir(fixture, tmp_path / "cache", tmp_path)
    evaluated = evaluate(eval_config(ckpt_path, tmp_path / "eval"))
    expected = json.loads((OLD_CHECKPOINTS / f"{name}.expected.json").read_text())
    assert_metrics_equal(evaluated, expected)
    assert json.loads((tmp_path / "eval" / "test_metrics.json").read_text()) == evaluated


def test_the_tokenizers_are_found_under_any_data_module_name():
    for name in ("TranslationDataModule", "DataModule"):
        checkpoint = {"state_dict": {}, name: TEXT_STATE, "attend": {"config": {}}}
        assert datamodule_state(checkpoint) is TEXT_STATE
    caption = {"CaptionDataModule": {"tgt_tokenizer": {"kind": "word"}}, "attend": {"config": {}}}
    assert datamodule_state(caption) == {"tgt_tokenizer": {"kind": "word"}}


def test_the_data_module_state_wins_over_the_models_old_copy():
    copy = {"src_tokenizer": {"kind": "old"}, "tgt_tokenizer": {"kind": "old"}}
    assert datamodule_state({"DataModule": TEXT_STATE, "attend": {"tokenizers": copy}}) is TEXT_STATE
    assert datamodule_state({"attend": {"config": {}, "tokenizers": copy}}) is copy  # only the copy: older files


def test_a_checkpoint_without_tokenizers_is_refused_in_one_line_naming_the_file(tmp_path):
    path = tmp_path / "stripped.ckpt"
    torch.save({"state_dict": {}, "attend": {"config": {}}}, path)
    with pytest.raises(ConfigError, match="stripped.ckpt") as error:
        load_checkpoint(path)
    assert "\n" not in str(error.value) and "tokenizers" in str(error.value)


def test_the_model_saves_its_config_and_no_copy_of_the_tokenizers():
    encoder = TextEncoder(10, embedding_dim=4, hidden_size=4)
    decoder = LuongDecoder(10, 8, additive(), embedding_dim=4, hidden_size=8)
    target = SimpleNamespace(pad_id=0, vocab_size=10, state_dict=lambda: {"kind": "char"})
    model = Seq2Seq(encoder, decoder, tokenizers={"target": target}, optimizer=None, val_search=None,
                    test_search=None, metrics={}, run_config={"task_name": "dates"})
    checkpoint: dict = {}
    model.on_save_checkpoint(checkpoint)
    assert checkpoint == {"attend": {"config": {"task_name": "dates"}}}  # Lightning adds the data module's state
