"""Sweeps through the real entry point: failures summarised, Optuna trials resumed and pruned, jobs in
parallel, SLURM job scripts, and the compare command on a real sweep."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.helpers.entry_points import run, run_failing
from tests.helpers.tiny_runs import TINY_MT


@pytest.mark.slow
def test_a_failing_job_does_not_stop_the_sweep_and_compare_reads_the_rest(tmp_path):
    """lr=-1 fails inside Adam; the other two jobs finish, the summary names the failure, the exit status is 1.
    compare_runs then reads the finished runs: table, CSV, bar chart and attention grid."""
    sweep = tmp_path / "sweep"
    result = run_failing("-m", "optim.optimizer.lr=0.001,-1,0.002", *TINY_MT, f"hydra.sweep.dir={sweep}")
    summary = json.loads((sweep / "sweep_summary.json").read_text())
    assert summary["counts"] == {"completed": 2, "pruned": 0, "failed": 1}
    failed = summary["jobs"][1]
    assert failed["status"] == "failed" and "optim.optimizer.lr=-1" in failed["overrides"]
    assert "Invalid learning rate" in failed["error"] and failed["folder"] == str(sweep / "1")
    output = result.stdout + result.stderr
    assert "1 of 3 jobs failed" in output and "#1 optim.optimizer.lr=-1" in output
    assert "Traceback" in (sweep / "1" / "train.log").read_text()  # the failed job's log keeps its traceback
    assert all((sweep / job / "summary.json").is_file() for job in ("0", "2"))

    compared = run("scripts/compare_runs.py", str(sweep))
    table = (sweep / "comparison.md").read_text()
    assert table.splitlines()[0].startswith("| optim.optimizer.lr | test/")  # the override that varies, first
    assert "| 0.001 |" in table and "| 0.002 |" in table
    assert len(table.splitlines()) == 2 + 2  # header, rule, the two finished runs
    assert len((sweep / "comparison.csv").read_text().splitlines()) == 3
    for png in ("comparison_test_bleu.png", "comparison_attention.png"):
        assert (sweep / png).stat().st_size > 5_000, png
    assert "wrote" in compared.stderr and compared.stdout == table


def optuna_sweep(sweep: Path, trials: int) -> subprocess.CompletedProcess:
    return run(
        "train.py", "-m", "hparams_search=mt_optuna", f"hydra.sweeper.n_trials={trials}", *TINY_MT,
        "attention=choice(additive,general)", "run_test=false", f"hydra.sweep.dir={sweep}",
    )


@pytest.mark.slow
def test_optuna_sweep_of_three_trials_resumes_from_its_sqlite_study(tmp_path):
    """Two trials, then a trial left RUNNING (as a killed sweep leaves it), then the same command with
    n_trials=3: the interrupted trial's parameters run again as trial 3, the two finished ones are kept."""
    sweep = tmp_path / "sweep"
    optuna_sweep(sweep, trials=2)
    storage = f"sqlite:///{sweep / 'optuna.db'}"
    study = optuna.load_study(study_name="attend", storage=storage)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2
    for trial in study.trials:  # each trial's value is what its job's train() returned
        job = json.loads((sweep / str(trial.number) / "summary.json").read_text())
        assert trial.value == job["monitor"]["best"]
    interrupted = study.ask(study.trials[0].distributions)  # RUNNING, never told: a sweep killed mid-trial

    optuna_sweep(sweep, trials=3)
    study = optuna.load_study(study_name="attend", storage=storage)
    states = [t.state for t in study.trials]
    assert states == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert study.trials[3].params == interrupted.params
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1", "3"]  # job folder = trial number
    summary = json.loads((sweep / "sweep_summary.json").read_text())
    assert summary["counts"]["completed"] == 1 and summary["best"]["number"] in (0, 1, 3)


PRUNE_EVERYTHING = """# @package _global_
defaults:
  - override /hydra/sweeper: attend_optuna
monitor:
  metric: val/loss
  mode: min
hydra:
  sweeper:
    direction: minimize
    n_trials: 1
    pruner:
      _target_: optuna.pruners.ThresholdPruner
      upper: 0.0
    params:
      optim.optimizer.lr: interval(0.001, 0.002)
"""


@pytest.mark.slow  # a train.py run of about 10 s: the slow tier (make test-slow; CI runs both)
def test_a_trial_is_pruned_from_its_validation_metric(tmp_path):
    """A pruner that prunes any loss above 0: the trial stops after its first validation of three epochs."""
    (tmp_path / "conf" / "hparams_search").mkdir(parents=True)
    (tmp_path / "conf" / "hparams_search" / "prune_everything.yaml").write_text(PRUNE_EVERYTHING)
    sweep = tmp_path / "sweep"
    run(
        "train.py", "-m", "hparams_search=prune_everything", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        *TINY_MT, "trainer.max_epochs=3", "trainer.max_steps=-1", "trainer.limit_train_batches=2", "run_test=false",
        f"hydra.sweep.dir={sweep}",
    )
    study = optuna.load_study(study_name="attend", storage=f"sqlite:///{sweep / 'optuna.db'}")
    (trial,) = study.trials
    assert trial.state == TrialState.PRUNED
    assert list(trial.intermediate_values) == [0]  # reported once, after epoch 0; epochs 1 and 2 never ran
    summary = json.loads((sweep / "sweep_summary.json").read_text())
    assert summary["counts"] == {"completed": 0, "pruned": 1, "failed": 0}


@pytest.mark.slow
def test_parallel_launcher_runs_jobs_at_the_same_time_in_their_own_slots(tmp_path):
    sweep = tmp_path / "sweep"
    run(
        "train.py", "-m", "attention=dot,general", "hydra/launcher=parallel", "hydra.launcher.n_jobs=2", *TINY_MT,
        "run_test=false", f"hydra.sweep.dir={sweep}",
    )
    jobs = [json.loads((sweep / job / "summary.json").read_text()) for job in ("0", "1")]
    assert sorted(job["device_slot"] for job in jobs) == [0, 1]
    first, second = sorted(jobs, key=lambda job: job["started_at"])
    assert second["started_at"] < first["finished_at"]  # they overlapped


# keeps the script it was given, then refuses it: the launcher stops at once instead of polling a queue
FAKE_SBATCH = """#!/bin/sh
cp "$1" "$FAKE_SLURM_DIR/submitted.sh"
echo "sbatch: error: no cluster here (a test)" >&2
exit 1
"""


@pytest.mark.slow  # a train.py run of about 10 s: the slow tier (make test-slow; CI runs both)
def test_slurm_launcher_writes_the_job_script_it_would_submit(tmp_path):
    """With sbatch and srun faked on PATH, hydra/launcher=slurm submits through submitit; the script asks for
    the nodes, the tasks and GPUs per node of trainer=ddp, and for SIGUSR1 before the time limit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {"sbatch": FAKE_SBATCH, "srun": "#!/bin/sh\n"}
    for name, text in fakes.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    run_failing(  # the fake sbatch refuses the job after keeping its script
        "-m", "hydra/launcher=slurm", "trainer=ddp", "trainer.devices=4", "trainer.num_nodes=2",
        "hydra.launcher.partition=gpu", f"hydra.sweep.dir={tmp_path / 'sweep'}",
        env={"FAKE_SLURM_DIR": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    script = (tmp_path / "submitted.sh").read_text()
    for line in ("--nodes=2", "--ntasks-per-node=4", "--gpus-per-node=4", "--signal=USR1@120", "--partition=gpu"):
        assert f"#SBATCH {line}\n" in script, line
    assert "srun" in script and "submitit" in script
