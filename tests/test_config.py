"""Every config combination composes and instantiates; precedence and errors behave as documented."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf, open_dict

from attend.builder import ConfigError, check_config
from attend.memory import Memory
from attend.run.config_types import type_errors
from tests.conftest import ROOT

CONF = ROOT / "conf"


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def compose_train(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def resolve_paths(cfg):
    """Outside a Hydra run, give the ${hydra:...} paths a value so the config resolves."""
    with open_dict(cfg):
        cfg.pop("hydra", None)  # the job never sees Hydra's own node
    cfg.paths.root_dir = str(ROOT)
    cfg.paths.output_dir = "/tmp/attend-test-output"
    return cfg


COMBINATIONS = list(
    itertools.product(options("task"), options("attention"), options("decoder"), options("encoder"))
)


# what each modality's encoders get from the data module (DataModule.encoder_kwargs())
ENCODER_KWARGS = {"text": {"vocab_size": 50, "pad_id": 0}, "image": {}, "audio": {"input_dim": 80}}


@pytest.mark.parametrize("task,attention,decoder,encoder", COMBINATIONS)
def test_every_combination_composes_and_instantiates(task, attention, decoder, encoder):
    cfg = compose_train([f"task={task}", f"attention={attention}", f"decoder={decoder}", f"encoder={encoder}"])
    assert cfg.hydra.runtime.choices.decoder == decoder  # the command line beats the task bundle
    assert cfg.hydra.runtime.choices.encoder == encoder
    cfg = resolve_paths(cfg)
    modality = get_class(cfg.data._target_).modality
    reads = get_class(cfg.encoder._target_).modality  # None: any modality (encoder=transformer)
    if reads not in (None, modality):
        with pytest.raises(ConfigError, match=f"gives {modality}: choose an {modality} encoder"):
            check_config(cfg)  # refused at start-up, before any data is read
        return
    check_config(cfg)
    encoder_module = instantiate(cfg.encoder, **ENCODER_KWARGS[modality])
    decoder_module = instantiate(
        cfg.decoder, vocab_size=60, pad_id=0, memory_dim=encoder_module.output_dim, attention=instantiate(cfg.attention)
    )
    memory = Memory(values=torch.randn(2, 5, encoder_module.output_dim), mask=torch.ones(2, 5, dtype=torch.bool))
    logits, attended = decoder_module.eval()(torch.randint(3, 60, (2, 3)), memory)  # the decoder reads this memory
    assert logits.shape == (2, 3, 60) and attended.weights.shape == (2, 3, 5)
    for name in ("val_search", "test_search"):
        assert callable(instantiate(cfg.model[name]))
    assert all(callable(getattr(m, "update", None)) for m in instantiate(cfg.model.metrics).values())


@pytest.mark.parametrize(
    "group", ["trainer", "logger", "callbacks", "debug", "optim", "data", "experiment", "hparams_search"]
)
def test_every_option_of_each_group_composes(group):
    for option in options(group):
        cfg = resolve_paths(compose_train([f"{group}={option}"]))
        OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
        assert type_errors(cfg) == [], option  # every shipped value has the type its class declares


def test_a_value_of_the_wrong_type_is_named_with_its_key():
    cfg = resolve_paths(compose_train(["encoder.hidden_size=abc", "data.batch_size=1.5", "trainer.max_epochs=ten"]))
    assert type_errors(cfg) == [
        "data.batch_size must be int, not 1.5: set data.batch_size=<int>",
        "encoder.hidden_size must be int, not 'abc': set encoder.hidden_size=<int>",
        "trainer.max_epochs must be int or null, not 'ten': set trainer.max_epochs=<int or null>",
    ]


def test_debug_fast_is_small_and_keeps_no_checkpoint():
    cfg = compose_train(["debug=fast"])
    assert cfg.callbacks.model_checkpoint is None and cfg.callbacks.last_checkpoint is None
    assert cfg.trainer.max_steps <= 10


def test_unknown_option_fails_at_once_with_the_choices():
    result = subprocess.run(
        [sys.executable, "train.py", "attention=nope"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "Could not find 'attention/nope'" in result.stderr
    assert "additive" in result.stderr and "multihead" in result.stderr  # Hydra lists the choices


def test_missing_mandatory_value_is_named_at_start_up():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = resolve_paths(compose(config_name="eval"))
    with pytest.raises(ConfigError, match="ckpt_path"):
        check_config(cfg)


def test_an_option_tuned_for_another_decoder_is_refused_by_name():
    # experiment=dates sets the RNN decoder's embedding_dim and hidden_size; the Transformer has neither
    cfg = resolve_paths(compose_train(["experiment=dates", "decoder=transformer"]))
    with pytest.raises(ConfigError, match="TransformerDecoder has no option embedding_dim, hidden_size.*~decoder"):
        check_config(cfg)


def test_the_task_tunes_only_the_encoder_and_decoder_chosen():
    rnn = compose_train(["task=caption"])
    assert rnn.decoder.rnn_type == "lstm" and rnn.decoder.context_gate  # conf/task_tuning/decoder/caption_bahdanau
    transformer = resolve_paths(compose_train(["task=caption", "decoder=transformer"]))
    assert "rnn_type" not in transformer.decoder
    check_config(transformer)
