"""A callback for tests that interrupts a train.py run as a cluster would: SIGTERM to itself at the end of a given
epoch's validation (Lightning then stops right after the epoch, before any next step), which the Preemption
callback turns into a saved checkpoint and a clean stop."""

from __future__ import annotations

import os
import signal

import lightning as L


class PreemptAfterEpoch(L.Callback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch == self.epoch and not trainer.sanity_checking:
            os.kill(os.getpid(), signal.SIGTERM)
