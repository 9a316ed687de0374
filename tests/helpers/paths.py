"""Where things are: the checkout, its configs and the test fixtures."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: tests/helpers/paths.py -> the folder holding tests/
CONF = ROOT / "conf"
FIXTURES = ROOT / "tests" / "fixtures"
# a tiny dates model (characters in, ISO dates out) from earlier code: tests/fixtures/old_checkpoints/README.md
DATES = FIXTURES / "old_checkpoints" / "dates.ckpt"
MULTI30K = FIXTURES / "multi30k"  # five German -> English test sentences
