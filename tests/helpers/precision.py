"""Mixed precision with gradient clipping on the CPU: the dates model with a huge loss, a spy on the optimizer's
steps, and a loss made NaN at chosen steps."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from attend.builder import build_datamodule, build_model
from attend.config.compose import compose_config
from tests.helpers.tiny_runs import TINY_MT

CLIP = 1.0
HUGE = 1e3  # the loss is multiplied by this: gradient norms of hundreds, far above CLIP


def gradient_norm(parameters) -> float:
    """The 2-norm of all the gradients."""
    return float(torch.stack([p.grad.float().norm() for p in parameters if p.grad is not None]).norm())


class StepSpy(L.Callback):
    """Records, after each optimizer step, the gradient norm it stepped with and the scale it was told to undo."""

    def __init__(self) -> None:
        self.norms: list[float] = []
        self.scales: list = []  # optimizer.grad_scale, which a fused step divides by (None or absent: nothing)
        self.optimizer: torch.optim.Optimizer | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.optimizer = trainer.optimizers[0]
        self.optimizer.register_step_post_hook(self.record)  # the closure runs inside bf16's step

    def record(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        self.norms.append(gradient_norm(p for group in optimizer.param_groups for p in group["params"]))
        self.scales.append(getattr(optimizer, "grad_scale", None))


def tiny_model(*overrides: str):
    """The dates model of TINY_MT with the default optimizer (fused AdamW) and a loss HUGE times the real one."""
    cfg = compose_config([o for o in TINY_MT if not o.startswith(("debug=", "logger="))] + [*overrides])
    datamodule = build_datamodule(cfg)
    datamodule.prepare_data()
    datamodule.setup("fit")
    model = build_model(cfg, datamodule)
    losses = model.teacher_forced_losses

    def huge(batch: dict) -> dict:
        result = losses(batch)
        result["cross_entropy"] = result["cross_entropy"] * HUGE
        return result

    model.teacher_forced_losses = huge
    return model, datamodule


def unclipped_norm(model, datamodule) -> float:
    """The fp32 gradient norm of a training batch, nothing clipped."""
    model.zero_grad()
    model.teacher_forced_loss(next(iter(datamodule.train_dataloader()))).backward()
    norm = gradient_norm(model.parameters())
    model.zero_grad(set_to_none=True)
    return norm


def fit(model, datamodule, steps: int, **trainer_options) -> tuple[L.Trainer, StepSpy]:
    """Train ``steps`` steps on the CPU with gradient clipping at CLIP."""
    spy = StepSpy()
    trainer = L.Trainer(
        accelerator="cpu", max_steps=steps, gradient_clip_val=CLIP, callbacks=[spy], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
        num_sanity_val_steps=0, **trainer_options,
    )
    trainer.fit(model, datamodule=datamodule)
    return trainer, spy


def assert_clipped_steps(spy: StepSpy, steps: int) -> None:
    """Every step stepped with gradients clipped to norm CLIP, none left for the optimizer to unscale."""
    assert spy.norms == pytest.approx([CLIP] * steps, rel=1e-4)  # clip_grad_norm_ scales them to CLIP exactly
    assert spy.scales == [None] * steps


def nan_at(model, steps: set[int]):
    """Make the loss NaN at the given batch numbers (counted over the run)."""
    losses, seen = model.teacher_forced_losses, [0]

    def injected(batch):
        result = losses(batch)
        seen[0] += 1
        if seen[0] - 1 in steps:
            result["cross_entropy"] = result["cross_entropy"] * float("nan")
        return result

    model.teacher_forced_losses = injected

