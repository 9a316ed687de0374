"""W&B runs as a user reviews them: named and tagged from the config, the whole config logged, and a
run resumed from a checkpoint continuing the same W&B run."""

from __future__ import annotations

import pytest
import torch

from attend.callbacks.wandb_run_id import CHECKPOINT_KEY
from tests.helpers.entry_points import run
from tests.helpers.tiny_runs import TINY_MT

# checkpoints kept (no debug=fast): one epoch of two steps, validation on one batch
SHORT = [o for o in TINY_MT if not o.startswith(("debug=", "logger="))] + [
    "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "run_test=false",
    "callbacks.attention_plots.num_examples=1",
]


def wandb_run_folders(run_dir) -> list:
    return sorted((run_dir / "wandb").glob("offline-run-*"))


@pytest.mark.slow
def test_wandb_run_is_named_from_the_config_and_resumed_runs_continue_it(tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    run("train.py", *SHORT, f"hydra.run.dir={first}")
    (folder,) = wandb_run_folders(first)
    records = next(folder.glob("*.wandb")).read_bytes()
    for text in ("mt-dates-rnn-additive-luong", "task:mt", "data:dates", "encoder:rnn", "decoder:luong"):
        assert text.encode() in records, text  # name and tags
    assert b"label_smoothing" in records and b"compile_options" in records  # the resolved config
    run_id = folder.name.rsplit("-", 1)[1]
    checkpoint = torch.load(first / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint[CHECKPOINT_KEY] == run_id and checkpoint["global_step"] == 2

    run("train.py", *SHORT, "trainer.max_epochs=2", f"ckpt_path={first / 'checkpoints' / 'last.ckpt'}",
        f"hydra.run.dir={resumed}")
    (folder,) = wandb_run_folders(resumed)
    assert folder.name.endswith(f"-{run_id}")  # the same W&B run: `wandb sync` merges both folders into it
    checkpoint = torch.load(resumed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint[CHECKPOINT_KEY] == run_id and checkpoint["global_step"] == 4  # steps continued
