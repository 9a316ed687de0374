"""Shared fixtures (a padded source batch and its memory), the test processes' settings, and the order of the
slowest files. What test modules share besides fixtures is in tests/helpers/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from attend.encoders import TextEncoder

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


# the files that take longest, longest first: the two xdist workers (which take whole files in collection
# order) then finish together instead of one starting the matrix when the other is nearly done
SLOW_FILES_FIRST = (
    "run/test_matrix.py", "run/test_entry_points.py", "run/test_distributed.py", "sweeps/test_sweeps.py",
    "metrics/test_caption_ddp.py", "callbacks/test_time_budget_ddp.py",
)
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}

    def place(item) -> int:
        path = item.path.resolve()
        name = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else str(path)
        return rank.get(name, len(SLOW_FILES_FIRST))

    items.sort(key=place)  # stable: the other files keep their order


