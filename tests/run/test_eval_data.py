"""eval.py data=<another data config>: the test split of that config, read with the checkpoint's modality and
tokenizers; another modality is a one-line error; the data is prepared under eval.py's paths.cache_dir."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from attend.checkpoints.saved_config import moved, run_config, with_cache_dir, with_test_data
from attend.checkpoints.saved_run import load_checkpoint, load_run
from attend.config.errors import ConfigError
from attend.data import ParallelText, WordTokenizer
from attend.run.evaluate import evaluate
from tests.helpers.configs import eval_config
from tests.helpers.datamodules import text_datamodule
from tests.helpers.paths import DATES, MULTI30K, ROOT


def test_another_data_config_of_the_same_modality_is_decoded_and_scored(tmp_path):
    cache = tmp_path / "cache"
    cfg = eval_config(DATES, tmp_path / "eval",
                      ["data=parallel_text", f"data.source.root={MULTI30K}", f"paths.cache_dir={cache}"])
    metrics = evaluate(cfg)
    # the dates model's metrics, but not the alignment error: parallel text has no alignments to score against
    assert {"test/bleu", "test/chrf", "test/exact", "test/loss"} <= set(metrics)
    assert "test/alignment_error" not in metrics
    assert json.loads((tmp_path / "eval" / "test_metrics.json").read_text()) == metrics
    rows = (tmp_path / "eval" / "test_predictions.tsv").read_text(encoding="utf-8").splitlines()[1:]
    sources = (MULTI30K / "test.de").read_text(encoding="utf-8").splitlines()
    references = (MULTI30K / "test.en").read_text(encoding="utf-8").splitlines()
    # every English reference letter is unk to the dates model's target tokenizer (digits and "-"): no crash
    assert [row.split("\t")[:2] for row in rows] == [list(pair) for pair in zip(sources, references, strict=True)]
    # prepared under the cache dir eval.py was given, not under the one the checkpoint saved (/tmp/fx/...); the
    # test split's examples alone are encoded (a large corpus's training set would be featurized for nothing)
    assert len(list((cache / "store").glob("records-*"))) == 3
    assert len(list((cache / "store").glob("encoded-*"))) == 1


def test_a_data_module_set_up_for_some_splits_needs_fitted_tokenizers_and_known_names(tmp_path):
    datamodule = text_datamodule(ParallelText(MULTI30K), WordTokenizer(), WordTokenizer(),
                                 cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="splits are train, val, test; got dev"):
        datamodule.only_splits("dev")
    datamodule.only_splits("test", "val")
    assert datamodule.splits == ("val", "test")
    with pytest.raises(RuntimeError, match="nothing fits the tokenizers: load them from a checkpoint"):
        datamodule.setup("test")


def test_the_same_data_config_with_other_source_settings_keeps_its_own_metrics(tmp_path):
    cfg = eval_config(DATES, tmp_path / "eval", ["data=dates", "data.source.n_train=100", "data.source.n_val=10",
                                                  "data.source.n_test=12", f"paths.cache_dir={tmp_path / 'cache'}"])
    metrics = evaluate(cfg)
    assert "test/alignment_error" in metrics  # dates batches carry alignments
    rows = (tmp_path / "eval" / "test_predictions.tsv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 1 + 12


def test_another_modality_is_a_one_line_error_naming_both(tmp_path):
    result = subprocess.run(
        [sys.executable, "eval.py", f"ckpt_path={DATES}", "data=tuxpaint_speech", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "data=tuxpaint_speech gives audio" in errors[0] and "reads text" in errors[0]


def test_the_source_and_loader_are_the_data_configs_the_rest_and_its_interpolations_the_checkpoints(tmp_path):
    frontend = {"_target_": "attend.data.LogMelFrontEnd", "n_mels": 40}  # what the model was trained on
    config = OmegaConf.create({  # a speech run's saved config, as far as the data goes
        "seed": 7, "paths": {"cache_dir": "/runs/cache"},
        "data": {"_target_": "attend.data.DataModule", "seed": 7, "cache_dir": "/runs/cache", "max_source_len": 900,
                 "modality": {"_target_": "attend.data.AudioModality", "frontend": frontend, "spec_augment": None},
                 "source": {"_target_": "attend.data.audio.LibriSpeech", "root": "/corpora/LibriSpeech"},
                 "tokenizer": {"_target_": "attend.data.CharTokenizer", "lowercase": True},
                 "loader": {"_target_": "attend.data.datamodule.Loader", "batch_size": 8, "num_workers": 1}},
        "model": {"metrics": {"cer": {"_target_": "attend.metrics.CharErrorRate"}}},
    })
    cfg = eval_config(DATES, tmp_path, ["data=espeak_en", "data.source.n_test=7", "data.loader.eval_batch_size=3"])
    data = with_test_data(config, cfg).data
    assert data.source._target_ == "attend.data.audio.EspeakSpeech" and data.source.n_test == 7
    assert data.source.seed == 7 and data.source.cache_dir == "/runs/cache"  # ${seed}, ${paths.cache_dir}
    assert data.loader.eval_batch_size == 3 and data.loader.num_workers == 1 and data.loader.batch_size == 32
    assert data.modality.frontend == frontend and data.max_source_len == 900 and data.tokenizer.lowercase


def test_a_data_config_value_left_unset_is_named_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"not set: data\.source\.image_root, data\.source\.path") as error:
        evaluate(eval_config(DATES, tmp_path, ["data=karpathy"]))
    assert "\n" not in str(error.value)


def test_the_cache_dir_of_the_command_line_moves_every_saved_path_under_the_old_one():
    config = OmegaConf.create({
        "paths": {"cache_dir": "/old/cache", "root_dir": "/old"},
        "data": {"cache_dir": "/old/cache", "source": {"cache_dir": "/old/cache/espeak", "root": "/old/corpus"}},
    })
    assert with_cache_dir(config, None) is config  # none given: where the checkpoint's run prepared its data
    moved_config = with_cache_dir(config, "/new")
    assert moved_config.paths == {"cache_dir": "/new", "root_dir": "/old"}
    assert moved_config.data.cache_dir == "/new" and moved_config.data.source.cache_dir == "/new/espeak"
    assert moved_config.data.source.root == "/old/corpus"
    assert moved("/old/cachet", "/old/cache", "/new") == "/old/cachet"  # a sibling with a longer name stays


def test_unseen_caption_metrics_are_left_out_on_another_data_set(tmp_path):
    """``*_unseen`` means captions the model never saw in training; scored on another data set's test split they
    would be measured against that data set's training captions, so they are left out (the rest is scored)."""
    shapes = DATES.parent / "shapes.ckpt"
    cfg = eval_config(shapes, tmp_path / "eval", ["data=shapes", "data.source.n_train=40", "data.source.n_val=4",
                                                   "data.source.n_test=6", f"paths.cache_dir={tmp_path / 'cache'}"])
    metrics = evaluate(cfg)
    assert "test/cider" in metrics and "test/pointing" in metrics
    assert not [name for name in metrics if name.endswith("_unseen")]


def test_one_call_reads_a_checkpoint_upgrades_its_config_and_applies_the_command_line(tmp_path):
    cfg = eval_config(DATES, tmp_path, ["decoding.beam_size=3", "decoding.length_penalty=0.2",
                                        f"paths.cache_dir={tmp_path / 'cache'}"])
    run = load_run(DATES, cfg)
    assert run.path == DATES and "state_dict" in run.checkpoint and run.tokenizers["tgt_tokenizer"]
    assert run.config.data._target_ == "attend.data.DataModule"  # saved before the data modules became one
    # and before the harness moved into rooms
    assert run.config.callbacks.preemption._target_ == "attend.callbacks.preemption.Preemption"
    assert run.config.trainer.plugins[0]._target_ == "attend.checkpoints.files.AtomicCheckpointIO"
    search = run.config.model.test_search
    assert (search._target_, search.beam_size, search.length_penalty) == ("attend.search.BeamSearch", 3, 0.2)
    assert run.config.paths.cache_dir == run.config.data.cache_dir == str(tmp_path / "cache")
    assert load_run(DATES).config == run_config(load_checkpoint(DATES))  # no command line: only the upgrade
