"""Resuming exactly: the position inside the epoch and the random number generators are saved in every
checkpoint, so a run killed mid-epoch continues with the next batch and the same dropout masks."""

from __future__ import annotations

import logging
import warnings

import lightning as L
import numpy as np
import torch
from lightning.fabric.utilities.seed import _collect_rng_states, _set_rng_states

log = logging.getLogger(__name__)
CHECKPOINT_KEY = "attend_resume"


class ResumePosition(L.Callback):
    """Saves the batches trained in the current epoch and the RNG states (torch, CUDA, NumPy, Python) with
    each checkpoint; on resume, restores the RNGs and makes the bucketing sampler skip the batches already
    trained (Lightning restores the step and epoch counters, the optimizer and the scheduler)."""

    def __init__(self) -> None:
        # this callback is what makes a mid-epoch checkpoint resumable: Lightning's warning that it is not is moot
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch")
        self.batches_this_epoch = 0
        self.resume_batches = 0
        self.rng_states: dict | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # restored here, not at loading: creating the data loader's iterator (after loading, before this
        # hook) draws from torch's generator, which the uninterrupted run had done before the checkpoint
        if self.rng_states is not None:
            _set_rng_states(numpy_state_back(self.rng_states))
            self.rng_states = None
        # Lightning does not call on_train_epoch_start for an epoch it resumes in the middle; this hook runs
        # before the sampler's first batch is drawn
        if not self.resume_batches:
            return
        sampler = getattr(trainer.train_dataloader, "batch_sampler", None)
        if hasattr(sampler, "resume_after"):
            sampler.resume_after(self.resume_batches)
            log.info("resuming epoch %d after its first %d batches", trainer.current_epoch, self.resume_batches)
        else:
            log.warning("the training data loader cannot skip batches (data.loader.bucket=false): the resumed "
                        "epoch starts again from its first batch")
        self.batches_this_epoch, self.resume_batches = self.resume_batches, 0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.batches_this_epoch = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        # runs before the checkpoint callbacks (Lightning calls them last), so a checkpoint counts this batch
        self.batches_this_epoch += 1

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        mid_epoch = 0 < self.batches_this_epoch < trainer.num_training_batches
        checkpoint[CHECKPOINT_KEY] = {
            "batches_this_epoch": self.batches_this_epoch if mid_epoch else 0,
            "rng_states": loadable_rng_states(_collect_rng_states(include_cuda=True)),
        }

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        state = checkpoint.get(CHECKPOINT_KEY)
        if state is None:
            return
        self.resume_batches = state["batches_this_epoch"]
        self.rng_states = state["rng_states"]


def loadable_rng_states(states: dict) -> dict:
    """NumPy's generator state as a tensor: torch.load(weights_only=True), which Lightning resumes with,
    refuses NumPy arrays."""
    if "numpy" in states:
        kind, keys, *rest = states["numpy"]
        states = {**states, "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), *rest)}
    return states


def numpy_state_back(states: dict) -> dict:
    """The inverse of ``loadable_rng_states``."""
    if "numpy" in states:
        kind, keys, *rest = states["numpy"]
        states = {**states, "numpy": (kind, keys.numpy().astype(np.uint32), *rest)}
    return states

