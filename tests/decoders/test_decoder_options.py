"""Every decoder declares its options: the start-up type check reads them, so a wrong-typed ``decoder.*``
value stops the run by name before any data is read."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys

import pytest
from torch import nn

import attend.decoders
from attend.decoders import BahdanauDecoder, LuongDecoder, RNNDecoder
from tests.helpers.paths import ROOT

VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def decoder_classes() -> list[type]:
    """Every nn.Module class defined in a module of src/attend/decoders."""
    classes = []
    for info in pkgutil.iter_modules(attend.decoders.__path__):
        module = importlib.import_module(f"attend.decoders.{info.name}")
        classes += [
            obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, nn.Module) and obj.__module__ == module.__name__
        ]
    return classes


def test_the_decoder_classes_are_all_found():
    names = {cls.__name__ for cls in decoder_classes()}
    assert {"RNNDecoder", "BahdanauDecoder", "LuongDecoder", "TransformerDecoder"} <= names


@pytest.mark.parametrize("cls", decoder_classes(), ids=lambda cls: cls.__name__)
def test_no_decoder_takes_args_or_kwargs(cls):
    if "__init__" not in vars(cls):
        return  # nn.Module's own, or a base class's checked on its own
    parameters = inspect.signature(cls.__init__).parameters.values()
    variadic = [p.name for p in parameters if p.kind in VARIADIC]
    assert not variadic, f"{cls.__name__}.__init__ takes {variadic}: the start-up type check cannot see those options"
    unannotated = [p.name for p in parameters if p.name != "self" and p.annotation is inspect.Parameter.empty]
    assert not unannotated, f"{cls.__name__}.__init__ leaves {unannotated} without a type"


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_the_rnn_flows_mirror_the_base_options(cls):
    """Same names, order, kinds, annotations and defaults as RNNDecoder (Luong adds input_feeding)."""
    base = list(inspect.signature(RNNDecoder.__init__).parameters.values())
    own = list(inspect.signature(cls.__init__).parameters.values())
    assert own[: len(base)] == base
    extra = {p.name: p for p in own[len(base) :]}
    if cls is LuongDecoder:
        assert list(extra) == ["input_feeding"] and extra["input_feeding"].default is True
        assert extra["input_feeding"].kind is inspect.Parameter.KEYWORD_ONLY
    else:
        assert not extra


def run_train(*overrides: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "train.py", *overrides, f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.mark.parametrize(
    "overrides,option,expected",
    [
        (["decoder.hidden_size=big"], "decoder.hidden_size", "decoder.hidden_size must be int, not 'big'"),
        (
            ["decoder=bahdanau", "decoder.dropout=much"],
            "decoder.dropout",
            "decoder.dropout must be float or int, not 'much'",
        ),
    ],
    ids=["default-decoder", "bahdanau"],
)
def test_a_wrong_typed_decoder_option_stops_at_start_up(overrides, option, expected, tmp_path):
    result = run_train(*overrides, tmp_path=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert errors[0].startswith("Error: ConfigError: config values of the wrong type: ")
    assert expected in errors[0] and f"set {option}=<" in errors[0]
    assert "Traceback" not in output
