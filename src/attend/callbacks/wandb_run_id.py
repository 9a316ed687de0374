"""The W&B run id saved in every checkpoint, so that a resumed run logs into the same W&B run."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.loggers import WandbLogger

CHECKPOINT_KEY = "wandb_run_id"


class WandbRunInCheckpoint(L.Callback):
    """Saves the W&B run id in every checkpoint (``wandb_run_id``), so resuming reuses it."""

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger) and trainer.is_global_zero:
                checkpoint[CHECKPOINT_KEY] = logger.experiment.id
