"""Speech recognition through the real entry points: train.py, eval.py and predict.py in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import open_dict

from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.data.audio import EspeakSpeech
from tests.helpers.entry_points import pngs, run
from tests.helpers.paths import ROOT

# a small espeak-ng corpus and model; short searches, since an untrained speller never stops by itself
SMALL_ASR = [
    "experiment=espeak_numbers",
    "data.source.n_train=48",
    "data.source.n_val=4",
    "data.source.n_test=4",
    "data.loader.batch_size=8",
    "encoder.hidden_size=32",
    "decoder.hidden_size=64",
    "decoder.embedding_dim=16",
    "model.val_search.max_len_a=0.2",
    "model.test_search.max_len_a=0.2",
    "model.test_search.beam_size=2",
]
ASR_METRICS = {"test/cer", "test/wer", "test/loss", "test/ctc", "test/cer_ctc"}  # cer_ctc: the CTC head alone


def test_asr_train_then_evaluate_and_transcribe_audio_files(tmp_path):
    train_dir, eval_dir, predict_dir = tmp_path / "train", tmp_path / "eval", tmp_path / "predict"
    run(
        "train.py", *SMALL_ASR, "trainer.max_epochs=1", "trainer.limit_train_batches=3",
        "callbacks.attention_plots.num_examples=1", f"hydra.run.dir={train_dir}",
    )
    best = train_dir / "checkpoints" / "best.ckpt"
    assert best.is_file()
    runs = list((train_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and pngs(runs[0] / "files" / "media" / "images")  # alignment plots reach W&B

    sweep = run("scripts/ctc_weight_sweep.py", str(best), "--weights", "0", "0.5", "--word-prior-weights", "0", "0.3",
                "--split", "test")
    rows = [line.split()[0:4] for line in sweep.stdout.splitlines() if line.startswith(("CTC", "attention", "ctc_"))]
    assert [row[:2] for row in rows[:2]] == [["CTC", "head"], ["attention", "alone,"]]
    assert [row[1::2] for row in rows[2:]] == [["0", "0"], ["0", "0.3"], ["0.5", "0"], ["0.5", "0.3"]]  # each pair

    # the test search with the word prior (a checkpoint saved with it off), through eval.py's decoding options
    result = run("eval.py", f"ckpt_path={best}", "num_plots=0", "decoding.word_prior_weight=0.5",
                 f"hydra.run.dir={eval_dir / 'prior'}")
    assert ASR_METRICS <= set(json.loads((eval_dir / "prior" / "test_metrics.json").read_text()))

    result = run("eval.py", f"ckpt_path={best}", "num_plots=2", f"hydra.run.dir={eval_dir}")
    assert ASR_METRICS <= set(json.loads((eval_dir / "test_metrics.json").read_text()))
    assert len(pngs(eval_dir / "attention" / "test")) == 2
    assert "test/cer" in result.stdout

    audio = EspeakSpeech(ROOT / "data_cache", n_train=48, n_val=4, n_test=4).splits()["test"][0].path
    result = run("predict.py", f"ckpt_path={best}", f"inputs=[{audio}]", f"hydra.run.dir={predict_dir}")
    lines = [line for line in result.stdout.splitlines() if "\t" in line]
    assert len(lines) == 1 and lines[0].startswith(f"{audio}\t")
    assert len(pngs(predict_dir / "attention")) == 1

    missing = subprocess.run(
        [sys.executable, "predict.py", f"ckpt_path={best}", f"inputs=[{tmp_path / 'nope.wav'}]",
         f"hydra.run.dir={predict_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert missing.returncode != 0 and "nope.wav" in missing.stderr


def test_las_experiment_builds_the_papers_listener_and_speller(tmp_path):
    cfg = compose_config(["experiment=las", "data.source.root=/nonexistent"], output_dir=tmp_path)
    encoder = instantiate(cfg.encoder, input_dim=cfg.data.modality.frontend.n_mels)
    assert encoder.time_reduction == 8 and encoder.output_dim == 512
    assert isinstance(encoder.rnn, torch.nn.LSTM) and all(isinstance(rnn, torch.nn.LSTM) for rnn in encoder.pyramid)
    decoder = instantiate(
        cfg.decoder, vocab_size=30, pad_id=0, memory_dim=encoder.output_dim, attention=instantiate(cfg.attention)
    )
    assert decoder.num_layers == 2 and decoder.hidden_size == 512 and decoder.sampling_probability == 0.1
    features, lengths = torch.randn(2, 80, 40), torch.tensor([80, 53])
    memory = encoder(features, lengths)
    assert memory.values.shape == (2, 10, 512) and memory.mask.sum(1).tolist() == [10, 7]
    logits, attended = decoder(torch.randint(3, 30, (2, 6)), memory)
    assert logits.shape == (2, 6, 30) and attended.weights.shape == (2, 6, 10)


def test_threads_sets_torchs_cpu_threads_for_the_run(tmp_path):
    """Every task measures its threads (threads: auto, attend.callbacks.ThreadsThatFit); a number sets torch's
    threads for the run."""
    asr, mt = (compose_config([f"task={task}"], output_dir=tmp_path) for task in ("asr", "mt"))
    assert asr.threads == mt.threads == "auto"
    script = ("import torch, attend.run.context as c; from attend.config.compose import compose_config; "
              f"cfg = compose_config(['experiment=dates', 'threads=3', 'logger=csv'], output_dir='{tmp_path}');\n"
              "with c.run_context(cfg): print('threads', torch.get_num_threads())")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "threads 3" in done.stdout, done.stderr[-2000:]  # 3: not what the test process runs with


@pytest.mark.parametrize("threads", [0, -2, "two"])
def test_a_bad_threads_value_is_one_line_at_start_up(threads, tmp_path):
    with pytest.raises(ConfigError, match="threads must be auto, null or a whole number of CPU threads") as error:
        check_config(compose_config(["task=asr", f"threads={threads}"], output_dir=tmp_path))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("overrides, encoder, frontend, data", [
    (["task=asr"], "attend.encoders.whisper.WhisperEncoder", "attend.data.WhisperLogMel", "asterisk_amazon_queen"),
    (["experiment=asr_scratch"], "attend.encoders.AudioEncoder", "attend.data.LogMelFrontEnd", "asterisk_amazon_queen"),
    (["experiment=french"], "attend.encoders.AudioEncoder", "attend.data.LogMelFrontEnd", "french"),
    (["experiment=espeak_numbers"], "attend.encoders.AudioEncoder", "attend.data.LogMelFrontEnd", "espeak_en"),
    (["task=asr", "frontend=telephone", "encoder=audio"], "attend.encoders.AudioEncoder", "attend.data.LogMelFrontEnd",
     "asterisk_amazon_queen"),
])
def test_each_speech_recipe_pairs_its_encoder_with_its_front_end(overrides, encoder, frontend, data, tmp_path):
    """The front end is a config group (frontend=whisper | telephone) merged into data.modality: the Whisper recipe
    reads Whisper's log-mel frames without SpecAugment, the from-scratch recipes the telephone band with it."""
    cfg = compose_config(overrides, output_dir=tmp_path, keep_hydra=True)
    modality = cfg.data.modality
    assert cfg.encoder._target_ == encoder and modality.frontend._target_ == frontend
    assert cfg.hydra.runtime.choices.data == data
    assert (modality.spec_augment is None) == (frontend == "attend.data.WhisperLogMel")
    with open_dict(cfg):
        cfg.pop("hydra")  # the job never sees Hydra's own node
    check_config(cfg)
