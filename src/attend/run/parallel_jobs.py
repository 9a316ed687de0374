"""Jobs of a sweep running at the same time (``hydra/launcher=parallel``): each claims a free slot and
trains on that slot's GPU, or shares the CPU cores with the others."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from attend.ranks import in_a_sweep

log = logging.getLogger(__name__)
SLOTS_FOLDER = ".device_slots"


def parallel_jobs() -> int:
    """How many jobs of this sweep the launcher runs at once (1 outside a sweep, or one job at a time)."""
    if not in_a_sweep():
        return 1
    return int(HydraConfig.get().launcher.get("n_jobs") or 1)


@contextlib.contextmanager
def claimed_slot(folder: Path, slots: int, poll_seconds: float = 0.5) -> Iterator[int]:
    """Hold the first free slot 0..slots-1 (an exclusive lock on ``folder/<slot>.lock``) while the block runs.
    A lock dies with its process, so a killed job never keeps its slot."""
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        for slot in range(slots):
            handle = open(folder / f"{slot}.lock", "w")  # noqa: SIM115 (held for the block)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield slot
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        time.sleep(poll_seconds)  # more jobs than slots: wait for one to end


@contextlib.contextmanager
def device_slot(cfg: DictConfig) -> Iterator[int | None]:
    """With n > 1 parallel jobs: claim a slot, train on GPU ``slot`` (one-device runs on a machine with GPUs)
    or on cores / n CPU threads; yields the slot. Otherwise yields None and changes nothing."""
    jobs = parallel_jobs()
    if jobs <= 1:
        yield None
        return
    with claimed_slot(Path(HydraConfig.get().sweep.dir) / SLOTS_FOLDER, jobs) as slot:
        pin_to_slot(cfg, slot, jobs)
        yield slot


def pin_to_slot(cfg: DictConfig, slot: int, jobs: int) -> None:
    """GPU ``slot`` (modulo the GPUs there are) for a one-device run; else a share of the CPU threads."""
    trainer = cfg.trainer
    gpus = torch.cuda.device_count()
    if gpus and trainer.get("accelerator") in ("gpu", "cuda", "auto") and trainer.get("devices") in (1, "1"):
        with open_dict(trainer):
            trainer.devices = [slot % gpus]
        log.info("parallel job slot %d of %d: GPU %d", slot, jobs, slot % gpus)
        return
    threads = max(1, (os.cpu_count() or 1) // jobs)
    torch.set_num_threads(threads)
    log.info("parallel job slot %d of %d: %d CPU threads", slot, jobs, threads)
