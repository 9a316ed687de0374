"""Training throughput in the progress bar: target tokens per second."""

from __future__ import annotations

import time

import lightning as L


class TokensPerSecond(L.Callback):
    """Shows non-padding target tokens per second (wall clock, data loading included) in the progress bar."""

    def __init__(self, smoothing: float = 0.9) -> None:
        self.smoothing = smoothing
        self.rate: float | None = None
        self.last: float | None = None

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.last = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.last = time.perf_counter()  # validation time is not training time

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = time.perf_counter()
        elapsed, self.last = now - (self.last or now), now
        if elapsed <= 0:
            return
        rate = batch["num_target_tokens"] / elapsed
        self.rate = rate if self.rate is None else self.smoothing * self.rate + (1 - self.smoothing) * rate
        pl_module.log("train/tok_s", self.rate, prog_bar=True, on_step=True, on_epoch=False, batch_size=1)
