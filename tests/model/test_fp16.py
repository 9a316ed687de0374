"""fp16-mixed (``trainer=gpu trainer.precision=16-mixed``) with gradient clipping trains: Lightning's MixedPrecision
plugin with a loss scaler, driven on the CPU (GradScaler("cpu"), fp16 autocast), as on a GPU."""

from __future__ import annotations

import json

import pytest
import torch
from lightning.pytorch.plugins import MixedPrecision
from omegaconf import OmegaConf

from tests.helpers.entry_points import run
from tests.helpers.precision import CLIP, assert_clipped_steps, fit, nan_at, tiny_model, unclipped_norm
from tests.helpers.tiny_runs import TINY_MT

SCALE = 8.0  # a scale small enough that the HUGE gradients stay finite in fp16 (the default 65536 skips steps)


def fp16(scale: float = SCALE) -> MixedPrecision:
    """The plugin Lightning builds for precision=16-mixed, with the scaler on the CPU."""
    return MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=scale, growth_interval=100))


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
def test_fp16_mixed_adamw_steps_with_the_unscaled_clipped_gradients(fused):
    """Fused AdamW (the default) unscales in its own step, so Lightning leaves the gradients scaled and refuses to
    clip them; Seq2Seq unscales them first. Each step gets gradients of norm CLIP and no scale left to undo."""
    model, datamodule = tiny_model(f"optim.optimizer.fused={str(fused).lower()}")
    assert unclipped_norm(model, datamodule) > 20 * CLIP
    plugin = fp16()
    trainer, spy = fit(model, datamodule, steps=3, plugins=[plugin])
    assert trainer.precision_plugin is plugin and trainer.global_step == 3
    assert spy.optimizer.defaults["fused"] is fused
    assert_clipped_steps(spy, 3)
    assert plugin.scaler.get_scale() == SCALE  # no step was skipped for inf gradients


def test_fp16_mixed_update_is_the_clipped_unscaled_gradient():
    """Fused SGD at lr 1 moves the weights by exactly the gradient it steps with: norm CLIP, once (neither the
    scaled gradient, nor one unscaled twice, nor an unclipped one)."""
    model, datamodule = tiny_model("optim=sgd", "+optim.optimizer.fused=true", "optim.optimizer.lr=1.0")
    before = [p.detach().clone() for p in model.parameters()]
    _, spy = fit(model, datamodule, steps=1, plugins=[fp16()])
    assert isinstance(spy.optimizer, torch.optim.SGD) and spy.optimizer.defaults["fused"]
    moved = torch.stack([(p.detach() - b).norm() for p, b in zip(model.parameters(), before, strict=True)]).norm()
    assert float(moved) == pytest.approx(CLIP, rel=1e-4)


def test_fp16_mixed_skipped_nan_steps_leave_the_scaler_ready_for_the_next():
    """A NaN loss skips its step (no backward, no scaler step): nothing is unscaled then, or the next step's
    unscale would fail (the scaler allows one unscale per update)."""
    model, datamodule = tiny_model()
    nan_at(model, {0, 2})
    trainer, spy = fit(model, datamodule, steps=5, plugins=[fp16()])  # Lightning counts the skipped steps here
    assert trainer.global_step == 5 and model.nonfinite_steps == 2
    assert_clipped_steps(spy, 3)  # batches 1, 3 and 4


FP16_PLUGINS = (  # train.py with Lightning's fp16 plugin on the CPU (precision=16-mixed becomes bf16 there)
    "trainer.precision=null",
    "trainer.plugins=[{_target_:lightning.pytorch.plugins.MixedPrecision,precision:16-mixed,device:cpu},"
    "{_target_:attend.checkpoints.files.AtomicCheckpointIO}]",
)


@pytest.mark.slow
def test_train_py_trains_in_fp16_mixed_with_the_default_fused_adamw_and_clipping(tmp_path):
    run("train.py", *TINY_MT, *FP16_PLUGINS, "callbacks.attention_plots=null", f"hydra.run.dir={tmp_path}")
    config = OmegaConf.load(tmp_path / "config_resolved.yaml")
    assert config.optim.optimizer.fused and config.trainer.gradient_clip_val == CLIP  # the defaults, as documented
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 4 and 0 < summary["val"]["val/loss"] < 10
