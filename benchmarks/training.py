"""Training-step measurements: A (Lightning) interleaved with the plain-loop variants, step by step."""

from __future__ import annotations

import copy
from collections.abc import Callable

import lightning as L
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from attend.model import Seq2Seq
from benchmarks.naive import NaiveSeq2Seq, NaiveTrainer
from benchmarks.timing import Timer, seed_step, to_device


class PlainLoop:
    """B: an Attend module trained by hand: the optimizer, schedule and clipping Lightning would apply."""

    def __init__(self, module: Seq2Seq, total_steps: int, clip: float, device: torch.device) -> None:
        self.module = module.to(device).train()
        self.optimizer = module.optimizer_factory(module.parameters())
        factory = module.scheduler_factory
        self.scheduler = None if factory is None else factory(self.optimizer, total_steps=total_steps)
        self.clip = clip
        self.device = device

    def step(self, batch: dict) -> torch.Tensor:
        """One training step; returns the loss (no host synchronisation)."""
        batch = to_device(batch, self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
            loss = self.module.teacher_forced_loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.clip)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return loss.detach()


def naive_model(cfg: DictConfig, src_vocab: int, tgt_vocab: int, pad_id: int) -> NaiveSeq2Seq:
    """D with the configured sizes (embedding, encoder and decoder sizes, attention size, dropout)."""
    return NaiveSeq2Seq(
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        embedding_dim=cfg.decoder.embedding_dim,
        encoder_hidden=cfg.encoder.hidden_size,
        decoder_hidden=cfg.decoder.hidden_size,
        attention_dim=cfg.attention.get("hidden_dim", 128),
        output_dim=cfg.decoder.output_dim or cfg.decoder.hidden_size,
        dropout=cfg.decoder.dropout,
        pad_id=pad_id,
        label_smoothing=cfg.model.label_smoothing,
    )


def naive_trainer(cfg: DictConfig, tokenizers: dict, device: torch.device) -> NaiveTrainer:
    """D and its tutorial training step (Adam at the configured rate, the configured clipping)."""
    src, tgt = tokenizers["source"], tokenizers["target"]
    model = naive_model(cfg, src.vocab_size, tgt.vocab_size, tgt.pad_id)
    return NaiveTrainer(model, lr=cfg.optim.optimizer.lr, clip=cfg.trainer.gradient_clip_val, device=device)


class Interleave(L.Callback):
    """Times A's steps inside the Trainer and, after each, one step of every other variant.

    A's step is timed from the end of this hook to the start of the next call: the batch fetch,
    the transfer, the hooks, ``training_step``, backward, clipping, the optimizer and the scheduler.
    Every variant's step ``i`` starts from the same random state (dropout masks).
    """

    def __init__(self, others: dict[str, Callable], batches: dict[str, list], seed: int, timer: Timer) -> None:
        self.others = others
        self.batches = batches
        self.seed = seed
        self.timer = timer
        self.losses: dict[str, list] = {name: [] for name in ["A", *others]}
        self.mark = None

    def on_train_start(self, trainer, pl_module) -> None:
        self.mark = self.timer.mark()  # the first step also carries the loop's start: a warm-up step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        seed_step(self.seed, batch_idx)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        now = self.timer.mark()
        self.timer.interval("A", self.mark, now)
        self.losses["A"].append(outputs["loss"].detach())
        for name, step in self.others.items():
            seed_step(self.seed, batch_idx)
            start = self.timer.mark()
            loss = step(self.batches[name][batch_idx])
            self.timer.interval(name, start, self.timer.mark())
            self.losses[name].append(loss)
        self.mark = self.timer.mark()


def trainer_for(cfg: DictConfig, steps: int, callbacks: list, device: torch.device) -> L.Trainer:
    """The configured Trainer for ``steps`` steps, without loggers, checkpoints, progress bar or validation."""
    return L.Trainer(
        accelerator="gpu" if device.type == "cuda" else "cpu",
        devices=1,
        max_steps=steps,
        max_epochs=-1,
        gradient_clip_val=cfg.trainer.gradient_clip_val,
        precision="bf16-mixed" if device.type == "cuda" else cfg.trainer.precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=callbacks,
        deterministic=cfg.trainer.deterministic,
    )


def batch_loader(batches: list[dict]) -> DataLoader:
    """A DataLoader over prepared batches, in order (the data pipeline is not what is measured)."""
    return DataLoader(batches, batch_size=None, shuffle=False, collate_fn=_same)


def _same(batch: dict) -> dict:
    return batch


def interleaved_run(
    module: Seq2Seq,
    others: dict[str, Callable],
    batches: dict[str, list],
    cfg: DictConfig,
    device: torch.device,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Train A through Lightning on ``batches["A"]`` and each other variant on its batches, step by step.

    Returns the step times (seconds) and the losses of every variant.
    """
    timer = Timer(device)
    interleave = Interleave(others, batches, cfg.seed, timer)
    trainer = trainer_for(cfg, len(batches["A"]), [interleave], device)
    trainer.fit(module, train_dataloaders=batch_loader(batches["A"]))
    times = {name: timer.seconds(name) for name in interleave.losses}
    losses = {name: [float(x) for x in values] for name, values in interleave.losses.items()}
    return times, losses


def plain_copy(module: Seq2Seq, total_steps: int, clip: float, device: torch.device) -> PlainLoop:
    """B: a deep copy of the module (same initial weights) in the plain loop."""
    return PlainLoop(copy.deepcopy(module), total_steps, clip, device)
