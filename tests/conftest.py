"""Shared fixtures: small random encoders, decoders and memories; eval.py's config outside a Hydra run."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from attend.attention import AdditiveAttention
from attend.encoders import TextEncoder

ROOT = Path(__file__).resolve().parents[1]
# a tiny dates model (characters in, ISO dates out) from earlier code: tests/fixtures/old_checkpoints/README.md
DATES = ROOT / "tests" / "fixtures" / "old_checkpoints" / "dates.ckpt"
os.environ.setdefault("WANDB_SILENT", "true")
# make test runs the suite on two pytest-xdist workers (pyproject.toml): one thread per process, here and in
# every train.py the tests start, so two trainings share the two cores instead of OpenMP threads spin-waiting
# for a core the other worker holds (which slowed both many times over)
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture
def source_batch():
    """Padded token ids (B=3, S=7) with lengths 7, 4, 2."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, 40, (3, 7), generator=generator)
    lengths = torch.tensor([7, 4, 2])
    src[1, 4:] = 0
    src[2, 2:] = 0
    return src, lengths


@pytest.fixture
def memory(source_batch):
    torch.manual_seed(0)
    encoder = TextEncoder(40, embedding_dim=8, hidden_size=8, dropout=0.0).eval()
    return encoder(*source_batch)


def additive(hidden_dim: int = 8):
    return functools.partial(AdditiveAttention, hidden_dim=hidden_dim)


# the files that take longest, longest first: the two xdist workers (which take whole files in collection
# order) then finish together instead of one starting the matrix when the other is nearly done
SLOW_FILES_FIRST = (
    "test_matrix.py", "test_entry_points.py", "test_distributed.py", "test_sweeps.py", "test_caption_ddp.py",
    "test_time_budget_ddp.py",
)


def pytest_collection_modifyitems(items: list) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES_FIRST)))  # stable: files keep their order


def eval_config(ckpt_path: Path, output_dir: Path, overrides: list[str] | tuple[str, ...] = ()):
    """eval.yaml as eval.py composes it for ``ckpt_path`` on the CPU, its ${hydra:...} paths given outside a
    Hydra run."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="eval", overrides=[f"ckpt_path={ckpt_path}", "accelerator=cpu", *overrides])
    with open_dict(cfg):
        cfg.paths.root_dir = str(ROOT)
        cfg.paths.output_dir = str(output_dir)
    return cfg
