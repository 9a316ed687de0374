"""Renamed data options: the old spelling is a start-up error naming the new one, and an old checkpoint's saved
data config is upgraded to today's form."""

from __future__ import annotations

import pytest
from hydra.utils import get_method, instantiate
from omegaconf import OmegaConf

from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.config.renamed_options import targets, upgrade, upgrade_config
from attend.data import AudioModality, TextModality


@pytest.mark.parametrize(("override", "named"), [
    ("+data.batch_size=8", "data.batch_size is now data.loader.batch_size"),
    ("+data.max_frames=100", "data.max_frames is now data.loader.max_tokens"),
    ("+data.max_duration=20", "data.max_duration is now data.max_source_len (in feature frames"),
    ("+data.src_tokenizer.vocab_size=10", "data.src_tokenizer is now data.modality.tokenizer"),
    ("+data.source.num_train=10", "data.source.num_train is now data.source.n_train"),
    ("+data.tokenizer_states={}", "data.tokenizer_states is gone"),
])
def test_an_old_spelling_is_refused_with_the_new_name(override, named, tmp_path) -> None:
    with pytest.raises(ConfigError, match="renamed") as error:
        check_config(compose_config([override], output_dir=tmp_path))
    assert named in str(error.value)


@pytest.mark.parametrize(("override", "named"), [
    ("+data.batchsize=3", "data attend.data.DataModule has no option batchsize"),
    ("+data.loader.batchsize=3", "data.loader attend.data.datamodule.Loader has no option batchsize"),
    ("+data.modality.tokeniser.x=1", "data.modality attend.data.TextModality has no option tokeniser"),
])
def test_an_unknown_data_option_is_refused_by_name(override, named, tmp_path) -> None:
    with pytest.raises(ConfigError, match="no option") as error:
        check_config(compose_config([override], output_dir=tmp_path))
    assert named in str(error.value)


def test_every_data_config_composes_checks_and_builds_its_modality(tmp_path) -> None:
    for task, data in [("mt", "ding_de_en"), ("mt", "dates"), ("caption", "shapes"), ("caption", "tuxpaint"),
                       ("caption", "emoji"), ("asr", "espeak_en"), ("asr", "tuxpaint_speech")]:
        cfg = compose_config([f"task={task}", f"data={data}"], output_dir=tmp_path)
        check_config(cfg)
        assert cfg.data._target_ == "attend.data.DataModule" and cfg.data.loader.batch_size > 0
        instantiate(cfg.data.modality)


def test_an_old_translation_config_is_upgraded() -> None:
    old = OmegaConf.create({
        "_target_": "attend.data.TranslationDataModule",
        "source": {"_target_": "attend.data.DingPairs", "cache_dir": "x"},
        "src_tokenizer": {"_target_": "attend.data.CharTokenizer"},
        "tgt_tokenizer": {"_target_": "attend.data.WordTokenizer"},
        "batch_size": 64, "max_tokens": 640, "bucket": True, "max_source_len": 100, "num_workers": 0, "seed": 1,
    })
    new = upgrade(old)
    assert new._target_ == "attend.data.DataModule" and "cache_dir" not in new.source
    assert new.modality._target_ == "attend.data.TextModality"
    assert new.modality.tokenizer == {"_target_": "attend.data.CharTokenizer"}
    assert new.tokenizer._target_ == "attend.data.WordTokenizer"
    assert new.loader == {"batch_size": 64, "max_tokens": 640, "bucket": True, "num_workers": 0}
    assert new.max_source_len == 100 and new.seed == 1
    assert upgrade(new) is new  # today's form is left as it is


def test_an_old_speech_config_is_upgraded_to_frames() -> None:
    old = OmegaConf.create({
        "_target_": "attend.data.SpeechDataModule",
        "source": {"_target_": "attend.data.audio.EspeakSpeech", "num_train": 5, "cache_dir": "c"},
        "tokenizer": {"_target_": "attend.data.CharTokenizer"}, "max_duration": 20.0, "max_transcript_chars": 400,
        "max_frames": None, "precompute": True,
        "frontend": {"_target_": "attend.data.LogMelFrontEnd", "hop_ms": 10.0},
    })
    new = upgrade(old)
    assert new.max_source_len == 2000 and new.max_target_len == 400 and new.source.n_train == 5
    assert new.source.cache_dir == "c"  # where espeak-ng writes its audio: not a cache beside the store
    assert new.modality.frontend.hop_ms == 10.0 and new.modality.precompute and new.loader.max_tokens is None
    modality = instantiate(new.modality)
    assert isinstance(modality, AudioModality) and modality.frontend.hop_ms == 10.0
    assert isinstance(instantiate({"_target_": "attend.data.TextModality", "tokenizer": new.tokenizer}), TextModality)


def test_a_class_named_where_it_used_to_be_is_refused_with_where_it_is_now(tmp_path) -> None:
    with pytest.raises(ConfigError, match="classes moved") as error:
        moved = "callbacks.preemption._target_=attend.run.preemption.Preemption"
        check_config(compose_config([moved], output_dir=tmp_path))
    assert "callbacks.preemption._target_=attend.run.preemption.Preemption is now " \
           "attend.callbacks.preemption.Preemption" in str(error.value)


def test_a_config_saved_before_the_harness_moved_names_todays_classes(tmp_path) -> None:
    today = compose_config(output_dir=tmp_path)
    saved = OmegaConf.to_container(today, resolve=False)
    for (group, name), old in {("callbacks", "preemption"): "attend.run.preemption.Preemption",
                               ("callbacks", "resume_position"): "attend.run.resume.ResumePosition",
                               ("logger", "wandb"): "attend.run.loggers.WandbLogger"}.items():
        saved[group][name]["_target_"] = old
    saved["trainer"]["plugins"][0]["_target_"] = "attend.run.checkpoint_io.AtomicCheckpointIO"
    upgraded = upgrade_config(OmegaConf.create(saved))
    assert OmegaConf.to_container(upgraded, resolve=False) == OmegaConf.to_container(today, resolve=False)
    for _key, target in targets(OmegaConf.to_container(upgraded, resolve=False)):
        if target.startswith("attend."):
            get_method(target)  # everything it names is importable where it says
    assert upgrade_config(today) == today  # a current config comes back equal
