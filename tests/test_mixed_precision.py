"""bf16-mixed (trainer=gpu's precision) trains with the default fused AdamW and gradient clipping."""

import json

from tests.test_entry_points import TINY_DATES, run


def test_bf16_mixed_with_fused_adamw_and_clipping_trains(tmp_path):
    """Lightning's mixed-precision plugin refuses to clip for a fused optimizer; Seq2Seq clips itself when no
    loss scaler is involved. On the CPU, bf16-mixed is the same plugin that trainer=gpu uses on a GPU."""
    run(
        "train.py", *TINY_DATES, "trainer.precision=bf16-mixed", "trainer.gradient_clip_val=1.0",
        "optim.optimizer.fused=true", "logger=csv", "run_test=false", "callbacks.attention_plots=null",
        f"hydra.run.dir={tmp_path}",
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 8
    assert 0 < summary["val"]["val/loss"] < 10
