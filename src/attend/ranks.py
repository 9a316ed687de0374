"""Hydra and Lightning's DDP relaunch: every rank of a job works in the job's one output folder."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import torch.distributed as dist
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import read_write


def is_global_zero() -> bool:
    """True in the process that writes files (rank 0, or a run without DDP); readable before the Trainer exists."""
    return rank_zero_only.rank == 0


def in_a_sweep() -> bool:
    """True in a job of a Hydra multirun (``-m``)."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def relaunch_ranks_as_this_job() -> None:
    """Make Lightning's DDP launcher start the other ranks as single runs of *this* job, in its folder.

    Lightning relaunches ``sys.argv`` with ``hydra.run.dir=<HydraConfig run.dir>``. In a multirun
    that command holds ``-m`` and the sweep's lists, so each rank would start a sweep of its own,
    in a new dated folder (the known pain of Lightning with Hydra). Here the command becomes
    the job's own overrides, and ``run.dir`` the job's output folder.
    """
    if not in_a_sweep():
        return
    hydra_cfg = HydraConfig.get()
    sys.argv = [sys.argv[0], *hydra_cfg.overrides.task]
    with read_write(hydra_cfg):
        hydra_cfg.run.dir = hydra_cfg.runtime.output_dir


@contextlib.contextmanager
def one_job_of_a_sweep() -> Iterator[None]:
    """Leave no distributed state behind: the next job of a multirun runs in this same process and
    would otherwise reuse this job's process group (whose other ranks have exited) and its
    MASTER_PORT / WORLD_SIZE environment."""
    environment = dict(os.environ)
    try:
        yield
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        for name in set(os.environ) - set(environment):
            del os.environ[name]
        os.environ.update(environment)
