"""Pruning of Optuna trials: a job of ``hydra/sweeper=attend_optuna`` reports its monitored
validation metric to the study after each validation and stops early when the pruner says so."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate

from attend.ranks import in_a_sweep

log = logging.getLogger(__name__)
SWEEPER = "hydra_plugins.attend_sweepers.optuna_sweeper.AttendOptunaSweeper"


def study_storage(storage: str | None, sweep_dir: str | Path) -> str:
    """The study's database: ``storage`` when set, else SQLite in the sweep folder."""
    return storage or f"sqlite:///{Path(sweep_dir).resolve() / 'optuna.db'}"


def trial_of_this_job():
    """The Optuna trial this Hydra job runs (its number is the job's number), or None outside an Optuna sweep."""
    if not in_a_sweep() or HydraConfig.get().sweeper.get("_target_") != SWEEPER:
        return None
    hydra_cfg = HydraConfig.get()
    import optuna

    sweeper = hydra_cfg.sweeper
    study = optuna.load_study(
        study_name=sweeper.study_name,
        storage=study_storage(sweeper.storage, hydra_cfg.sweep.dir),
        pruner=instantiate(sweeper.pruner) if sweeper.pruner else optuna.pruners.NopPruner(),
    )
    number = int(hydra_cfg.job.num)
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    return optuna.trial.Trial(study, frozen._trial_id)  # the running trial, rebuilt in this process


class OptunaPruning(L.Callback):
    """Reports ``monitor`` to this job's trial after each validation; when the study's pruner prunes it,
    training stops and fit ends with ``optuna.TrialPruned`` (the sweeper records the trial as pruned).
    Outside an Optuna sweep it does nothing. Under DDP rank 0 decides and tells the other ranks."""

    def __init__(self, monitor: str) -> None:
        self.monitor = monitor
        self.trial = None
        self.pruned: str | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit" and trainer.is_global_zero:
            self.trial = trial_of_this_job()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        reason = None
        value = trainer.callback_metrics.get(self.monitor)
        if self.trial is not None and value is not None:
            self.trial.report(float(value), step=trainer.current_epoch)
            if self.trial.should_prune():
                reason = f"pruned after epoch {trainer.current_epoch}: {self.monitor} = {float(value):.4g}"
        reason = trainer.strategy.broadcast(reason)
        if reason:
            log.info("Optuna trial %s", reason)
            self.pruned = reason
            trainer.should_stop = True

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.pruned:
            import optuna

            raise optuna.TrialPruned(self.pruned)
