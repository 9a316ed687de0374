"""``hydra/sweeper=attend_optuna``: an Optuna study driven through Hydra's launchers.

Each trial is one Hydra job, numbered by its trial number (folder ``<sweep dir>/<number>``). The
study lives in SQLite in the sweep folder, so running the same command again with
``hydra.sweep.dir=<that folder>`` continues it: finished trials are kept, trials cut off by the
interruption run again, and only the trials still missing up to ``n_trials`` are asked. ``n_jobs``
trials are asked and launched together (in parallel with ``hydra/launcher=parallel``). A job's
``OptunaPruning`` callback reports its validation metric to the same study and stops the job
when the pruner says so (attend/callbacks/optuna_pruning.py).
"""

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import optuna
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from attend.callbacks.optuna_pruning import study_storage
from hydra_plugins.attend_sweepers.search_space import search_space
from hydra_plugins.attend_sweepers.sweep_report import JobOutcome, finish_sweep, outcome_of, pinned_sweep_folder

log = logging.getLogger(__name__)
INTERRUPTED = "interrupted"  # user attribute of a trial a stopped sweep left running; it is asked again


@dataclass
class AttendOptunaSweeperConf:
    _target_: str = "hydra_plugins.attend_sweepers.optuna_sweeper.AttendOptunaSweeper"
    direction: str = "maximize"  # maximize | minimize (or max | min, as monitor.mode)
    n_trials: int = 20  # trials in the study in all, counting those of earlier runs of the sweep
    n_jobs: int = 1  # trials launched together
    study_name: str = "attend"
    storage: str | None = None  # null: sqlite:///<sweep dir>/optuna.db
    sampler: Any = field(default_factory=lambda: {"_target_": "optuna.samplers.TPESampler", "seed": 1234})
    pruner: Any = None  # e.g. {_target_: optuna.pruners.MedianPruner, n_startup_trials: 2}
    params: dict[str, str] | None = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="attend_optuna", node=AttendOptunaSweeperConf, provider="attend"
)


class AttendOptunaSweeper(Sweeper):
    """Ask ``n_jobs`` trials, launch them as jobs, tell the study each job's return value (or that
    it was pruned or failed), until the study holds ``n_trials`` finished trials."""

    def __init__(
        self, direction: str, n_trials: int, n_jobs: int, study_name: str, storage: str | None,
        sampler: Any, pruner: Any, params: dict[str, str] | None,
    ) -> None:
        self.direction = {"max": "maximize", "min": "minimize"}.get(direction, direction)
        self.n_trials = n_trials
        self.n_jobs = max(1, n_jobs)
        self.study_name = study_name
        self.storage = storage
        self.sampler = sampler  # Hydra instantiates it (and the pruner, which the jobs rebuild from their config)
        self.params = dict(params or {})

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        sweep_dir, pin_folder = pinned_sweep_folder(self.config)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        distributions, fixed = search_space(parser, self.params, arguments)
        storage = study_storage(self.storage, sweep_dir)
        study = optuna.create_study(
            study_name=self.study_name, storage=storage, direction=self.direction, load_if_exists=True,
            sampler=self.sampler,
        )
        requeue_interrupted(study)
        # the job's pruning callback opens the study at this address (its own sweep.dir may resolve otherwise)
        fixed = [*fixed, pin_folder, f"hydra.sweeper.storage='{storage}'"]
        outcomes: list[JobOutcome] = []
        started = time.perf_counter()
        while (missing := self.n_trials - finished_trials(study)) > 0:
            trials = [study.ask(distributions) for _ in range(min(self.n_jobs, missing))]
            batch = [fixed + [f"{key}={value}" for key, value in trial.params.items()] for trial in trials]
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=trials[0].number)
            for trial, result in zip(trials, results, strict=True):
                outcome = outcome_of(trial.number, result, pruned=(optuna.TrialPruned,))
                tell(study, trial, outcome)
                outcomes.append(outcome)
        finish_sweep(sweep_dir, outcomes, {
            "seconds": round(time.perf_counter() - started, 1), "study": self.study_name,
            "storage": storage, "best": best_trial(study),
        })
        return outcomes


def finished_trials(study: optuna.Study) -> int:
    """Trials that count towards ``n_trials``: completed, pruned or failed, not those cut off by an interruption."""
    done = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return sum(t.state in done and not t.user_attrs.get(INTERRUPTED) for t in study.get_trials(deepcopy=False))


def requeue_interrupted(study: optuna.Study) -> None:
    """Trials still RUNNING were cut off when the sweep stopped: mark them, and ask their parameters again."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        # Trial.set_user_attr needs a Trial object, which only the process that asked for it holds
        study._storage.set_trial_user_attr(trial._trial_id, INTERRUPTED, True)
        study.tell(trial.number, state=TrialState.FAIL)
        study.enqueue_trial(trial.params, skip_if_exists=False)
        log.info("trial %d was interrupted; running its parameters again", trial.number)


def tell(study: optuna.Study, trial: optuna.Trial, outcome: JobOutcome) -> None:
    """Record a job's outcome; a job that returned no number counts as failed."""
    if outcome.status == "pruned":
        study.tell(trial, state=TrialState.PRUNED)
    elif outcome.status == "completed" and outcome.value is not None and math.isfinite(outcome.value):
        study.tell(trial, outcome.value)
    else:
        if outcome.status == "completed":
            outcome.status, outcome.error = "failed", f"the job returned {outcome.value!r}, not a number"
        study.tell(trial, state=TrialState.FAIL)


def best_trial(study: optuna.Study) -> dict | None:
    if not any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
        return None
    best = study.best_trial
    return {"number": best.number, "value": best.value, "params": best.params}
