"""Preemption: SIGTERM or SIGUSR1 makes the run write a checkpoint at the next step boundary and stop cleanly."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import lightning as L
from lightning.fabric.plugins.environments import SLURMEnvironment

log = logging.getLogger(__name__)


class Preemption(L.Callback):
    """On ``signals`` (SIGTERM, SIGUSR1) the handler only notes the signal; after the current training step
    the run saves ``dirpath/filename`` (atomically, through the trainer's checkpoint IO) and stops; train()
    then skips the test and says how to resume. Under SLURM, SIGUSR1 stays Lightning's (save and requeue).
    Under DDP a signal to any rank stops every rank at the same step."""

    def __init__(self, dirpath: str, filename: str = "last.ckpt", signals: tuple[str, ...] = ("SIGTERM", "SIGUSR1")):
        self.path = Path(dirpath) / filename
        self.signals = [signal.Signals[name] for name in signals]
        self.received: str | None = None
        self.saved: Path | None = None
        self._previous: dict[signal.Signals, object] = {}

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python delivers signals to the main thread only
        for sig in self.signals:
            if sig == signal.SIGUSR1 and SLURMEnvironment.detect():
                continue
            self._previous[sig] = signal.signal(sig, self._note)

    def _note(self, signum: int, frame) -> None:
        self.received = signal.Signals(signum).name

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        self.save_if_signalled(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # a signal during the epoch's validation: Lightning stops right after this hook (its SIGTERMException),
        # before any next step, so the checkpoint and the message come here
        self.save_if_signalled(trainer)

    def save_if_signalled(self, trainer: L.Trainer) -> None:
        received = self.received is not None
        if trainer.world_size > 1:
            received = trainer.strategy.reduce_boolean_decision(received, all=False)
        if not received or self.saved is not None:
            return
        trainer.save_checkpoint(self.path)
        self.saved = self.path
        trainer.should_stop = True
        log.warning(
            "%s received: saved %s at step %d and stopping; resume with ckpt_path=%s",
            self.received or "a signal on another rank", self.path, trainer.global_step, self.path,
        )

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
