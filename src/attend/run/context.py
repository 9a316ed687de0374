"""What surrounds an entry point: ``run_context(cfg)`` around a training run, so that train() holds only the run
itself, and ``reported_as_messages()`` around every entry point, so that an error a user can fix (a config value, a
file, the data, a diverging run) is said in one line with the fix and exit status 2, not as a traceback from deep
inside a library."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from attend.checkpoints.files import NonFiniteWeightsError, UnreadableCheckpointError
from attend.checkpoints.resume import resolve_ckpt_path
from attend.config.checks import check_config
from attend.config.errors import ConfigError
from attend.config.hydra_choices import config_choices
from attend.data.bad_samples import DataError
from attend.loggers.tensorboard_run import configure_tensorboard
from attend.loggers.wandb_run import configure_wandb, finish_wandb_run
from attend.model import NonFiniteLossError
from attend.ranks import in_a_sweep, is_global_zero, one_job_of_a_sweep, relaunch_ranks_as_this_job
from attend.run.parallel_jobs import device_slot

log = logging.getLogger(__name__)

USER_ERRORS = (ConfigError, DataError, NonFiniteLossError, NonFiniteWeightsError, UnreadableCheckpointError)


@contextlib.contextmanager
def reported_as_messages() -> Iterator[None]:
    """Run an entry point; a user error becomes its message and exit status 2. In a sweep it propagates,
    so the sweep records it against its job and goes on with the others."""
    try:
        yield
    except USER_ERRORS as error:
        if in_a_sweep():
            raise
        print(f"Error: {type(error).__name__}: {error}", file=sys.stderr)  # where Hydra prints its own errors
        raise SystemExit(2) from None

# exceptions that end a sweep's job as planned, not as a failure: ``module.Class`` names, so that checking an
# error imports nothing (an exception of a module never imported cannot have been raised)
EXPECTED_STOPS = (
    "optuna.exceptions.TrialPruned",  # a pruned Optuna trial (attend.callbacks.optuna_pruning); the sweeper records it
)


def apply_threads(cfg: DictConfig) -> None:
    """PyTorch's CPU threads as ``threads`` says: a number fixes them; null and auto start from its default (one per
    core), and auto lets ``attend.callbacks.ThreadsThatFit`` measure which count trains fastest."""
    if cfg.get("threads") not in (None, "auto"):
        torch.set_num_threads(int(cfg.threads))


def expected_stop(error: BaseException) -> bool:
    """Whether ``error`` is one of EXPECTED_STOPS (or a subclass of one)."""
    for name in EXPECTED_STOPS:
        module, _, cls = name.rpartition(".")
        stop = getattr(sys.modules.get(module), cls, None)
        if isinstance(stop, type) and isinstance(error, stop):
            return True
    return False


@contextlib.contextmanager
def run_context(cfg: DictConfig) -> Iterator[int | None]:
    """Before the block: check the config, resolve ``ckpt_path`` (``last``, a run folder) to its file, save
    ``config_resolved.yaml`` (rank 0; DDP ranks share the folder), make Lightning relaunch the other DDP ranks
    as this job, fill in the W&B run's name, tags, group and id and the TensorBoard run's name, seed everything.
    Around the block: a sweep's job leaves no distributed state to the next, holds its device slot (yielded: the
    slot of a parallel sweep job, else None), logs its failure to the job's log, and closes its W&B run."""
    check_config(cfg)
    output_dir = Path(cfg.paths.output_dir)
    with open_dict(cfg):  # ckpt_path=last or a run folder: the checkpoint file it means
        cfg.ckpt_path = resolve_ckpt_path(cfg.get("ckpt_path"), output_dir.parent, output_dir)
    if is_global_zero():  # DDP ranks share the job's folder; rank 0 writes it
        output_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, output_dir / "config_resolved.yaml", resolve=True)
    relaunch_ranks_as_this_job()
    choices = config_choices()
    configure_wandb(cfg, choices)
    configure_tensorboard(cfg, choices)  # its run folder named like the W&B run
    L.seed_everything(cfg.seed, workers=True)
    apply_threads(cfg)
    with one_job_of_a_sweep(), device_slot(cfg) as slot:
        try:
            yield slot
        except Exception as error:
            # Hydra keeps a failed job's exception, not its traceback: put that in the job's log
            if in_a_sweep() and not expected_stop(error):
                log.exception("the job failed")
            raise
        finally:
            finish_wandb_run()
