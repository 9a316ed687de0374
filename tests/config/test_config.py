"""Every config combination composes and instantiates; precedence and errors behave as documented."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf, open_dict

from attend.builder import build_encoder
from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.config.option_types import type_errors
from attend.memory import Memory
from tests.helpers.configs import DECODER_FLOWS, options
from tests.helpers.paths import CONF, ROOT

NAMED_DECODERS = sorted(set(options("decoder")) - set(DECODER_FLOWS))
COMBINATIONS = list(itertools.product(options("task"), options("attention"), DECODER_FLOWS, options("encoder")))


# what each modality's encoders get from the data module (DataModule.encoder_kwargs())
ENCODER_KWARGS = {"text": {"vocab_size": 50, "pad_id": 0}, "image": {}, "audio": {"input_dim": 80}}


@pytest.mark.parametrize("task,attention,decoder,encoder", COMBINATIONS)
def test_every_combination_composes_and_instantiates(task, attention, decoder, encoder, tmp_path):
    overrides = [f"task={task}", f"attention={attention}", f"decoder={decoder}", f"encoder={encoder}"]
    cfg = compose_config(overrides, output_dir=tmp_path, keep_hydra=True)
    assert cfg.hydra.runtime.choices.decoder == decoder  # the command line beats the task bundle
    assert cfg.hydra.runtime.choices.encoder == encoder
    with open_dict(cfg):
        cfg.pop("hydra")  # the job never sees Hydra's own node
    modality = get_class(cfg.data.modality._target_).name  # the data module's plug-in says what it gives
    reads = get_class(cfg.encoder._target_).modality  # None: any modality (encoder=transformer)
    if reads not in (None, modality):
        with pytest.raises(ConfigError, match=f"gives {modality}: choose an {modality} encoder"):
            check_config(cfg)  # refused at start-up, before any data is read
        return
    check_config(cfg)
    data = SimpleNamespace(modality=modality, encoder_kwargs=lambda: ENCODER_KWARGS[modality])
    encoder_module = build_encoder(cfg, data)
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
    "group", ["trainer", "logger", "callbacks", "debug", "optim", "data", "experiment", "hparams_search", "search"]
)
def test_every_option_of_each_group_composes(group, tmp_path):
    for option in options(group):
        cfg = compose_config([f"{group}={option}"], output_dir=tmp_path)
        OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
        assert type_errors(cfg) == [], option  # every shipped value has the type its class declares


def test_a_value_of_the_wrong_type_is_named_with_its_key(tmp_path):
    overrides = ["encoder.hidden_size=abc", "data.loader.batch_size=1.5", "trainer.max_epochs=ten"]
    cfg = compose_config(overrides, output_dir=tmp_path)
    assert type_errors(cfg) == [
        "data.loader.batch_size must be int, not 1.5: set data.loader.batch_size=<int>",
        "encoder.hidden_size must be int, not 'abc': set encoder.hidden_size=<int>",
        "trainer.max_epochs must be int or null, not 'ten': set trainer.max_epochs=<int or null>",
    ]


def test_a_wrong_value_reached_through_an_interpolation_names_the_key_to_set(tmp_path):
    cfg = compose_config(["decoding.beam_size=wide"], output_dir=tmp_path)
    assert type_errors(cfg) == [
        "model.test_search.beam_size must be int, not 'wide': set decoding.beam_size=<int>",
    ]


def test_debug_fast_is_small_and_keeps_no_checkpoint(tmp_path):
    cfg = compose_config(["debug=fast"], output_dir=tmp_path, keep_hydra=True)
    assert cfg.hydra.runtime.choices.callbacks == "no_checkpoints"  # a callback set chosen, not entries nulled
    default = compose_config([], output_dir=tmp_path).callbacks
    assert set(default) - set(cfg.callbacks) == {"model_checkpoint", "last_checkpoint", "step_checkpoint"}
    assert all(entry is not None for entry in cfg.callbacks.values())
    assert cfg.callbacks.attention_plots.num_examples == 2  # debug's own value on the shared file
    assert cfg.trainer.max_steps <= 10


def test_one_file_per_callback(tmp_path):
    default = OmegaConf.load(CONF / "callbacks" / "default.yaml")
    named = [entry for entry in default.defaults if entry != "_self_"]
    assert sorted(named) == sorted(set(options("callbacks")) - {"default", "no_checkpoints"})
    for name in named:
        assert list(OmegaConf.load(CONF / "callbacks" / f"{name}.yaml")) == [name]  # the file holds its callback
    callbacks = compose_config([], output_dir=tmp_path).callbacks
    assert list(callbacks) == named  # composed in the order listed


def test_unknown_option_fails_at_once_with_the_choices():
    result = subprocess.run(
        [sys.executable, "train.py", "attention=nope"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "Could not find 'attention/nope'" in result.stderr
    assert "additive" in result.stderr and "multihead" in result.stderr  # Hydra lists the choices


def test_missing_mandatory_value_is_named_at_start_up(tmp_path):
    cfg = compose_config(config_name="eval", output_dir=tmp_path)
    with pytest.raises(ConfigError, match="ckpt_path"):
        check_config(cfg)


@pytest.mark.parametrize("override, message", [
    ("model.guided_attention=-1", r"model.guided_attention must be in \[0, ∞\), got -1"),
    ("model.guided_attention_sigma=0", r"model.guided_attention_sigma must be in \(0, ∞\), got 0"),
    ("model.ctc_weight=1.5", r"model.ctc_weight must be in \[0, 1\], got 1.5"),
    ("model.label_smoothing=1", r"model.label_smoothing must be in \[0, 1\), got 1"),
])
def test_loss_weights_out_of_range_are_refused_at_start_up(override, message, tmp_path):
    cfg = compose_config(["task=asr", override], output_dir=tmp_path)
    with pytest.raises(ConfigError, match=message):
        check_config(cfg)


def test_an_option_tuned_for_another_decoder_is_refused_by_name(tmp_path):
    # experiment=dates sets the RNN decoder's embedding_dim and hidden_size; the Transformer has neither
    cfg = compose_config(["experiment=dates", "decoder=transformer"], output_dir=tmp_path)
    with pytest.raises(ConfigError, match="TransformerDecoder has no option embedding_dim, hidden_size.*~decoder"):
        check_config(cfg)


def test_each_task_picks_a_named_decoder_and_another_choice_replaces_it_whole(tmp_path):
    caption = compose_config(["task=caption"], output_dir=tmp_path, keep_hydra=True)
    assert caption.hydra.runtime.choices.decoder == "show_attend_tell"
    assert caption.decoder.rnn_type == "lstm" and caption.decoder.context_gate  # built on decoder/bahdanau.yaml
    assert caption.decoder._target_ == "attend.decoders.BahdanauDecoder"
    assert compose_config(["task=asr"], output_dir=tmp_path).decoder.embedding_dim == 32  # decoder/speller.yaml
    luong = compose_config(["task=caption", "decoder=luong"], output_dir=tmp_path).decoder
    assert dict(luong) == dict(OmegaConf.load(CONF / "decoder" / "luong.yaml"))  # nothing of the caption decoder
    transformer = compose_config(["task=caption", "decoder=transformer"], output_dir=tmp_path)
    assert "rnn_type" not in transformer.decoder
    check_config(transformer)


@pytest.mark.parametrize("decoder", NAMED_DECODERS)
@pytest.mark.parametrize("task", options("task"))
def test_every_named_decoder_builds_for_every_task(task, decoder, tmp_path):
    cfg = compose_config([f"task={task}", f"decoder={decoder}"], output_dir=tmp_path)
    check_config(cfg)
    module = instantiate(cfg.decoder, vocab_size=30, pad_id=0, memory_dim=256, attention=instantiate(cfg.attention))
    memory = Memory(values=torch.randn(2, 4, 256), mask=torch.ones(2, 4, dtype=torch.bool))
    logits, _ = module.eval()(torch.randint(3, 30, (2, 3)), memory)
    assert logits.shape == (2, 3, 30)


@pytest.mark.parametrize("task", options("task"))
def test_the_task_writes_its_length_limits_once_for_both_searches(task, tmp_path):
    cfg = compose_config([f"task={task}"], output_dir=tmp_path)
    limits = (cfg.decoding.max_len_a, cfg.decoding.max_len_b)
    test_search, val_search = instantiate(cfg.model.test_search), instantiate(cfg.model.val_search)
    assert type(test_search).__name__ == "BeamSearch" and type(val_search).__name__ == "GreedySearch"
    assert test_search.beam_size == cfg.decoding.beam_size
    for search in (test_search, val_search):
        assert (search.max_len_a, search.max_len_b) == limits
    greedy = compose_config([f"task={task}", "search=greedy"], output_dir=tmp_path)
    assert type(instantiate(greedy.model.test_search)).__name__ == "GreedySearch"  # the task's beam options stay out
    assert (greedy.model.test_search.max_len_a, greedy.model.test_search.max_len_b) == limits
    wider = compose_config([f"task={task}", "model.test_search.beam_size=9", "decoding.max_len_b=7"],
                           output_dir=tmp_path)
    assert instantiate(wider.model.test_search).beam_size == 9
    assert instantiate(wider.model.val_search).max_len_b == instantiate(wider.model.test_search).max_len_b == 7


@pytest.mark.parametrize("data", options("data"))
def test_every_data_config_gets_the_shared_options_once(data, tmp_path):
    shared = OmegaConf.load(CONF / "data_common" / "default.yaml")
    text = (CONF / "data" / f"{data}.yaml").read_text()
    assert not any(f"{key}:" in line.split("#")[0] and not line.startswith("    ")
                   for key in ("on_error", "max_skip_fraction") for line in text.splitlines()), data
    cfg = compose_config([f"data={data}"], output_dir=tmp_path)
    for key in shared:
        assert key in cfg.data, (data, key)
    assert cfg.data.on_error == "skip" and cfg.data.max_skip_fraction == 0.1
    assert compose_config([f"data={data}", "data.on_error=raise"], output_dir=tmp_path).data.on_error == "raise"


MACHINE_TIMING = re.compile(r"\d+(\.\d+)?\s*(ms|s|seconds|min|minutes)\b.*\b(here|a step|an epoch|CPU cores?)\b"
                            r"|\b(here|on 2 CPU cores)\b.*\d+(\.\d+)?\s*(ms|s|minutes)\b")


def test_no_machine_timings_in_config_comments():
    found = []
    for path in sorted(CONF.rglob("*.yaml")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            comment = line.partition("#")[2]
            if MACHINE_TIMING.search(comment):
                found.append(f"{path.relative_to(CONF)}:{number}: {comment.strip()}")
    assert found == [], "machine timings belong in docs/, not conf/: " + "; ".join(found)
