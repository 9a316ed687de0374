"""The choices of a config group, and eval.py's config for a checkpoint (composed by attend.config.compose, the one
way to compose a config outside Hydra's entry point)."""

from __future__ import annotations

from pathlib import Path

from attend.config.compose import compose_config
from tests.helpers.paths import CONF

# the decoder flows; the named choices built on them (show_attend_tell, speller) are tested in config/test_config.py
DECODER_FLOWS = ["bahdanau", "luong", "transformer"]
ATTENTION_TYPES = sorted(p.stem for p in (CONF / "attention").glob("*.yaml"))


def eval_config(ckpt_path: Path, output_dir: Path, overrides: list[str] | tuple[str, ...] = ()):
    """eval.yaml as eval.py composes it for ``ckpt_path`` on the CPU, its run folder ``output_dir``."""
    return compose_config([f"ckpt_path={ckpt_path}", "accelerator=cpu", *overrides], "eval", output_dir)


def options(group: str) -> list[str]:
    """The choices of a config group: its files in conf/<group>/."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))
