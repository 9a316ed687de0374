"""The matrix: every task x every attention type x every decoder, trained two steps and validated
(a greedy search, metrics, a plot) through the real entry point (debug=fast). One Hydra multirun per
task and decoder runs the attention types (imports once); each cell is its own test that reads its
job's folder."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from attend.config.compose import compose_config
from attend.search import BeamSearch
from tests.helpers.configs import ATTENTION_TYPES, DECODER_FLOWS
from tests.helpers.entry_points import pngs, run
from tests.helpers.tiny_runs import TASK_OVERRIDES

DECODERS = DECODER_FLOWS  # the named decoders (show_attend_tell, speller) are these flows with other sizes: test_config
# tiny models: the decoder's query size equals the memory size, so dot-product types apply
RNN_DECODER = ["decoder.embedding_dim=16", "decoder.hidden_size=64"]
TRANSFORMER_DECODER = ["decoder.d_model=64", "decoder.num_layers=1", "decoder.num_heads=2", "decoder.ff_dim=128"]
DECODER_OVERRIDES = {"bahdanau": RNN_DECODER, "luong": RNN_DECODER, "transformer": TRANSFORMER_DECODER}
# what every cell must have measured: the task's main metrics and the attention diagnostics
TASK_METRICS = {
    "mt": {"val/bleu", "val/exact", "val/alignment_error", "val/entropy", "val/coverage"},
    "caption": {"val/bleu4", "val/cider", "val/pointing", "val/entropy", "val/coverage"},
    "asr": {"val/cer", "val/wer", "val/monotonic", "val/entropy", "val/coverage"},
}
CELLS = [(task, attention, decoder) for task in TASK_OVERRIDES for decoder in DECODERS for attention in ATTENTION_TYPES]


@functools.cache
def sweep(task: str, decoder: str, root: Path) -> Path:
    """Run every attention type for one task and decoder in one multirun; the sweep folder."""
    folder = root / f"{task}-{decoder}"
    run(
        "train.py", "-m", f"attention={','.join(ATTENTION_TYPES)}", f"decoder={decoder}", *TASK_OVERRIDES[task],
        *DECODER_OVERRIDES[decoder], "debug=fast", "logger=csv", "callbacks.attention_plots.num_examples=1",
        "trainer.max_steps=2", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "run_test=false",
        f"hydra.sweep.dir={folder}", timeout=900,
    )
    return folder


@pytest.fixture(scope="module")
def matrix_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("matrix")


# make test runs every task and attention type through the Bahdanau decoder; the Luong and Transformer sweeps are
# in the slow tier (make test-slow; CI runs both)
CELL_PARAMS = [pytest.param(*cell, id="-".join(cell), marks=() if cell[2] == "bahdanau" else pytest.mark.slow)
               for cell in CELLS]


@pytest.mark.parametrize(("task", "attention", "decoder"), CELL_PARAMS)
def test_cell_trains_searches_and_plots(task, attention, decoder, matrix_root):
    folder = sweep(task, decoder, matrix_root) / str(ATTENTION_TYPES.index(attention))
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["choices"]["attention"] == attention and summary["choices"]["decoder"] == decoder
    assert summary["steps"] == 2
    assert TASK_METRICS[task] <= set(summary["val"]), sorted(summary["val"])
    assert all(math.isfinite(value) for value in summary["val"].values())
    assert len(pngs(folder / "attention")) == 1  # one example plotted at the validation epoch
    assert (folder / "config_resolved.yaml").is_file()
    assert not list(folder.rglob("*.ckpt"))  # debug=fast keeps no checkpoint


# the conftest memory is 16 wide: decoders whose query size is 16, so dot-product types apply
TINY_RNN = ["decoder.embedding_dim=8", "decoder.hidden_size=16"]
TINY_DECODERS = {
    "bahdanau": TINY_RNN, "luong": TINY_RNN,
    "transformer": ["decoder.d_model=16", "decoder.num_layers=2", "decoder.num_heads=2", "decoder.ff_dim=32"],
}


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("attention", ATTENTION_TYPES)
def test_beam_search_runs_over_every_attention_type_and_decoder(attention, decoder, memory, tmp_path):
    """The test search of every cell, on tiny modules built from the real configs (the runs above validate)."""
    overrides = [f"attention={attention}", f"decoder={decoder}", *TINY_DECODERS[decoder]]
    cfg = compose_config(overrides, output_dir=tmp_path)
    torch.manual_seed(0)
    module = instantiate(cfg.decoder, vocab_size=30, pad_id=0, memory_dim=16, attention=instantiate(cfg.attention))
    result = BeamSearch(beam_size=3, max_len_a=1.0, max_len_b=3)(module.eval(), memory, bos_id=1, eos_id=2, pad_id=0)
    assert result.tokens.size(0) == 3 and torch.isfinite(result.scores).all()
    real = torch.arange(result.weights.size(1)).unsqueeze(0) < result.lengths.unsqueeze(1)  # (B, T)
    torch.testing.assert_close(result.weights.sum(-1)[real], torch.ones(int(real.sum())))  # weights of real steps
