"""DDP through the real entry point: 2 CPU processes (gloo) per task, one output folder per job, and
the same training as one process with the same global batch."""

from __future__ import annotations

import json

import pytest

import attend.metrics
from tests.helpers.entry_points import pngs, run
from tests.helpers.tiny_runs import TASK_OVERRIDES

pytestmark = pytest.mark.slow  # DDP runs of two processes each: make test-slow (CI runs both tiers)

DDP_CPU = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.precision=32-true"]
TINY_DECODER = ["decoder.embedding_dim=16", "decoder.hidden_size=64"]


def job_files(folder) -> set[str]:
    """Names directly in a run folder."""
    return {path.name for path in folder.iterdir()}


@pytest.mark.parametrize("task", ["caption", "asr"])
def test_ddp_run_of_each_task_finishes_in_one_folder(task, tmp_path):
    run("train.py", *TASK_OVERRIDES[task], *TINY_DECODER, *DDP_CPU, "debug=fast", f"hydra.run.dir={tmp_path}")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["test"] and summary["steps"] >= 1
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 1  # one W&B run, from rank 0
    assert len(pngs(tmp_path / "attention")) == 2  # rank 0 drew the plots, once
    assert "train_ddp_process_1.log" in job_files(tmp_path)  # rank 1 ran in the same folder


# dates translation, no dropout: DDP's two ranks x 16 sentences equal one process x 16 x 2 accumulated
EQUIVALENCE = [
    *TASK_OVERRIDES["mt"][:2], "data.source.n_train=512", "data.source.n_val=32", "data.source.n_test=16",
    "data.loader.batch_size=16", "data.loader.eval_batch_size=16", "encoder.embedding_dim=16", "encoder.hidden_size=32",
    *TINY_DECODER, "encoder.dropout=0", "decoder.dropout=0", "debug=fast", "trainer.max_steps=-1",
    "trainer.limit_val_batches=null", "logger=csv", "run_test=false", "callbacks.attention_plots=null",
]


def test_ddp_validation_loss_matches_one_process_with_the_same_global_batch(tmp_path):
    """Rank r of 2 takes batches r, r+2, ... of the same shuffled list; one process with accumulate_grad_batches=2
    takes them in pairs: the same four optimizer steps on the same sentences, the same validation set."""
    run("train.py", *EQUIVALENCE, *DDP_CPU, "trainer.limit_train_batches=4", f"hydra.run.dir={tmp_path / 'ddp'}")
    run(
        "train.py", *EQUIVALENCE, "trainer.accumulate_grad_batches=2", "trainer.limit_train_batches=8",
        f"hydra.run.dir={tmp_path / 'single'}",
    )
    ddp, single = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("ddp", "single"))
    assert ddp["steps"] == single["steps"] == 4
    assert ddp["val"]["val/loss"] == pytest.approx(single["val"]["val/loss"], abs=1e-4)


@pytest.mark.slow
def test_multirun_of_ddp_jobs_makes_one_folder_and_one_wandb_run_per_job(tmp_path):
    sweep = tmp_path / "sweep"
    run(
        "train.py", "-m", "attention=dot,general", *TASK_OVERRIDES["mt"], *TINY_DECODER, *DDP_CPU, "debug=fast",
        f"hydra.sweep.dir={sweep}", "hydra.run.dir=" + str(tmp_path / "stray"),
    )
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1"]  # no nested sweep, no per-rank folder
    assert not (tmp_path / "stray").exists()  # the ranks did not fall back to a run folder of their own
    for job, attention in (("0", "dot"), ("1", "general")):
        folder = sweep / job
        (wandb_run,) = (folder / "wandb").glob("offline-run-*/*.wandb")  # one W&B run, named and grouped
        records = wandb_run.read_bytes()
        for text in (f"mt-dates-rnn-{attention}-luong", f"attention:{attention}", "sweep:sweep", "label_smoothing"):
            assert text.encode() in records, text
        assert json.loads((folder / "summary.json").read_text())["test"]
        assert {"train.log", "train_ddp_process_1.log"} <= job_files(folder)
    summary = json.loads((sweep / "sweep_summary.json").read_text())
    assert summary["counts"] == {"completed": 2, "pruned": 0, "failed": 0}



# uneven evaluation splits: 21 validation dates in batches of 8 (8, 8, 5: rank 0 takes two, rank 1 one) and 19 test
# dates (8, 8, 3); padding the ranks to equal counts would score the 8 shortest twice. 128 steps at lr 0.01 train
# the tiny model far enough for non-zero BLEU and exact match (about 80 and 70).
UNEVEN = [
    *EQUIVALENCE[:2], "data.source.n_train=512", "data.source.n_val=21", "data.source.n_test=19",
    *EQUIVALENCE[5:], "data.loader.eval_batch_size=8", "trainer.limit_test_batches=null", "run_test=true",
    "trainer.max_epochs=8", "trainer.check_val_every_n_epoch=8", "optim.optimizer.lr=0.01",
]
# asr: 5 validation and 5 test utterances in batches of 2 (2, 2, 1)
UNEVEN_ASR = [
    *TASK_OVERRIDES["asr"][:1], "data.source.n_train=32", "data.source.n_val=5", "data.source.n_test=5",
    *TASK_OVERRIDES["asr"][4:], *TINY_DECODER, "data.loader.eval_batch_size=2", "debug=fast", "logger=csv",
    "callbacks.attention_plots=null", "trainer.limit_val_batches=null", "trainer.limit_test_batches=null",
]


def tsv_rows(folder) -> list[list[str]]:
    """The decoded test set, one [source, reference, hypothesis] per example."""
    lines = (folder / "test_predictions.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines[1:]]


def scored(rows: list[list[str]], metrics: dict[str, str]) -> dict[str, float]:
    """``test/<name>`` of each text metric (``name: class in attend.metrics``) on the decoded rows, each once."""
    scores = {}
    for name, cls in metrics.items():
        metric = getattr(attend.metrics, cls)()
        decoded = attend.metrics.Decoded.text([hyp for _, _, hyp in rows], [ref for _, ref, _ in rows])
        metric.update(decoded)
        scores[f"test/{name}"] = float(metric.compute())
    return scores


@pytest.mark.slow
def test_ddp_scores_an_uneven_evaluation_split_once_like_one_process(tmp_path):
    """2 ranks on 3 validation and 3 test batches score each sentence once: every val and test metric (text,
    attention, loss) equals one process's after the same training, and test_metrics.json scores test_predictions.tsv."""
    run("train.py", *UNEVEN, *DDP_CPU, "trainer.limit_train_batches=16", f"hydra.run.dir={tmp_path / 'ddp'}")
    run(
        "train.py", *UNEVEN, "trainer.accumulate_grad_batches=2", "trainer.limit_train_batches=32",
        f"hydra.run.dir={tmp_path / 'single'}",
    )
    ddp, single = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("ddp", "single"))
    assert ddp["steps"] == single["steps"] == 128
    assert single["val"]["val/bleu"] > 10 and single["test"]["test/exact"] > 10  # a metric that can tell
    for split in ("val", "test"):
        assert set(ddp[split]) == set(single[split]) and len(single[split]) > 5, split
        for key, value in single[split].items():
            assert ddp[split][key] == pytest.approx(value, abs=1e-5), key
        for name in ("bleu", "chrf", "exact"):  # the same decoded text, scored once each: the same numbers
            assert ddp[split][f"{split}/{name}"] == single[split][f"{split}/{name}"], (split, name)
    rows = tsv_rows(tmp_path / "ddp")
    assert len(rows) == 19 and rows == tsv_rows(tmp_path / "single")
    written = json.loads((tmp_path / "ddp" / "test_metrics.json").read_text())
    for key, value in scored(rows, {"bleu": "BLEU", "chrf": "ChrF", "exact": "ExactMatch"}).items():
        assert written[key] == pytest.approx(value, abs=1e-9), key


def test_ddp_asr_test_metrics_score_each_utterance_once(tmp_path):
    """5 test utterances in 3 batches on 2 ranks: CER and WER in test_metrics.json are those of the 5 rows of
    test_predictions.tsv, each counted once."""
    run("train.py", *UNEVEN_ASR, *DDP_CPU, f"hydra.run.dir={tmp_path}")
    rows = tsv_rows(tmp_path)
    assert len(rows) == 5 and len({key for key, _, _ in rows}) == 5
    written = json.loads((tmp_path / "test_metrics.json").read_text())
    for key, value in scored(rows, {"cer": "CharErrorRate", "wer": "WordErrorRate"}).items():
        assert written[key] == pytest.approx(value, abs=1e-6), key
