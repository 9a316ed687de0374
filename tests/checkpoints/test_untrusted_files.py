"""Files other people hand a run run no code: a checkpoint whose pickle would run code is refused in one line by every
loader (eval.py and predict.py's ``load_checkpoint``, ``model.init_from``, a ``ckpt_path=`` resume, averaging, the
W&B run id read on resume), and so is an example store whose manifest holds pickled tokenizers."""

from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path

import pytest
import torch

from attend.checkpoints.averaging import read_kept
from attend.checkpoints.files import UnreadableCheckpointError, read_checkpoint
from attend.checkpoints.saved_run import load_checkpoint
from attend.config.errors import ConfigError
from attend.data.tokenizers.tokenizer import UntrustedStateError, states_from_text, states_to_text
from attend.loggers.wandb_run import run_id_in_checkpoint
from tests.helpers.contract_data import started, store_files
from tests.helpers.paths import DATES


class RunsCode:
    """Unpickling this creates ``marker``: the proof that loading ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


@pytest.fixture()
def crafted(tmp_path: Path) -> tuple[Path, Path]:
    """An Attend-looking checkpoint (a real one's contents) with one object that runs code when unpickled."""
    marker = tmp_path / "code-ran"
    checkpoint = torch.load(DATES, map_location="cpu", weights_only=True)
    checkpoint["attend"]["extra"] = RunsCode(marker)
    path = tmp_path / "crafted.ckpt"
    torch.save(checkpoint, path)
    return path, marker


def test_a_real_checkpoint_loads_as_data():
    assert "state_dict" in read_checkpoint(DATES) and "attend" in load_checkpoint(DATES)


def test_a_checkpoint_that_would_run_code_is_refused_by_every_loader(crafted, tmp_path):
    path, marker = crafted
    with pytest.raises(UnreadableCheckpointError, match="refusing to load .*could run code"):
        read_checkpoint(path)
    with pytest.raises(ConfigError, match="refusing to load"):
        load_checkpoint(path)  # eval.py, predict.py, model.init_from, scripts/ctc_weight_sweep.py
    with pytest.raises(ConfigError, match="refusing to load"):
        run_id_in_checkpoint(str(path))  # every ckpt_path= resume under the W&B logger
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "epoch=1.ckpt").write_bytes(path.read_bytes())
    with pytest.raises(ConfigError, match="cannot average .*refusing to load"):
        read_kept(kept)
    assert not marker.exists()


def test_a_truncated_checkpoint_is_one_line(tmp_path):
    path = tmp_path / "half.ckpt"
    path.write_bytes(DATES.read_bytes()[:1000])
    with pytest.raises(ConfigError, match="cannot read checkpoint"):
        load_checkpoint(path)


def test_tokenizer_states_are_json_with_bytes_kept():
    fitted = {"model_proto": b"\x00\xff"}
    states = {"tgt_tokenizer": {"class": "x.Y", "settings": {"lowercase": True}, "fitted": fitted}}
    text = states_to_text(states)
    assert json.loads(text)["tgt_tokenizer"]["fitted"]["model_proto"] == {"bytes_base64": "AP8="}
    assert states_from_text(text) == states


def test_pickled_tokenizer_states_are_not_read(tmp_path):
    marker = tmp_path / "code-ran"
    old = base64.b64encode(pickle.dumps({"tgt_tokenizer": RunsCode(marker)})).decode("ascii")
    with pytest.raises(UntrustedStateError, match="not JSON data"):
        states_from_text(old)
    assert not marker.exists()


def test_a_cached_store_with_a_crafted_manifest_runs_nothing(tmp_path):
    """The tokenizers of a cached store are read on the next start: a manifest rewritten to hold a pickle is refused
    with a one-line error naming the store, and nothing runs."""
    cache = tmp_path / "cache"
    started("text", cache)
    marker = tmp_path / "code-ran"
    for manifest in store_files(cache, "manifest.json"):
        content = json.loads(manifest.read_text(encoding="utf-8"))
        if "tokenizers" in content.get("meta", {}):
            content["meta"]["tokenizers"] = base64.b64encode(pickle.dumps(RunsCode(marker))).decode("ascii")
            manifest.write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(UntrustedStateError, match="the example store .* not JSON data"):
        started("text", cache)
    assert not marker.exists()
