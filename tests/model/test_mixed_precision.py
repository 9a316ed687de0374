"""bf16-mixed (trainer=gpu's precision) clips the gradients of the default fused AdamW: huge gradients reach the
optimizer's step with the clipping norm. The harness here serves the fp16 tests too (tests/model/test_fp16.py)."""

from __future__ import annotations

import torch

from tests.helpers.precision import (
    CLIP,
    assert_clipped_steps,
    fit,
    tiny_model,
    unclipped_norm,
)


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
