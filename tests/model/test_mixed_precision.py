"""bf16-mixed (trainer=gpu's precision) clips the gradients of the default fused AdamW: huge gradients reach the
optimizer's step with the clipping norm. The harness here serves the fp16 tests too (tests/test_fp16.py)."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from attend.builder import build_datamodule, build_model
from tests.config.test_config import compose_train, resolve_paths
from tests.sweeps.test_sweeps import TINY_MT

CLIP = 1.0
HUGE = 1e3  # the loss is multiplied by this: gradient norms of hundreds, far above CLIP


def tiny_model(*overrides: str):
    """The dates model of TINY_MT with the default optimizer (fused AdamW) and a loss HUGE times the real one."""
    cfg = resolve_paths(compose_train([o for o in TINY_MT if not o.startswith(("debug=", "logger="))] + [*overrides]))
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


def gradient_norm(parameters) -> float:
    """The 2-norm of all the gradients."""
    return float(torch.stack([p.grad.float().norm() for p in parameters if p.grad is not None]).norm())


def unclipped_norm(model, datamodule) -> float:
    """The fp32 gradient norm of a training batch, nothing clipped."""
    model.zero_grad()
    model.teacher_forced_loss(next(iter(datamodule.train_dataloader()))).backward()
    norm = gradient_norm(model.parameters())
    model.zero_grad(set_to_none=True)
    return norm


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


def test_bf16_mixed_with_fused_adamw_clips_huge_gradients():
    """Lightning's mixed-precision plugin refuses to clip for a fused optimizer; Seq2Seq clips itself. On the CPU,
    bf16-mixed is the same plugin that trainer=gpu uses on a GPU. Fails if clipping does nothing."""
    model, datamodule = tiny_model()
    assert unclipped_norm(model, datamodule) > 20 * CLIP
    before = [p.detach().clone() for p in model.parameters()]
    trainer, spy = fit(model, datamodule, steps=3, precision="bf16-mixed")
    assert type(trainer.precision_plugin).__name__ == "MixedPrecision" and trainer.global_step == 3
    assert isinstance(spy.optimizer, torch.optim.AdamW) and spy.optimizer.defaults["fused"]  # the default optimizer
    assert_clipped_steps(spy, 3)
    assert any(not torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))  # it stepped
