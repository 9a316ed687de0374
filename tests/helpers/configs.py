"""The configs as the entry points compose them, outside a Hydra run, and the choices of a config group."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from tests.helpers.paths import CONF, ROOT

# the decoder flows; the named choices built on them (show_attend_tell, speller) are tested in config/test_config.py
DECODER_FLOWS = ["bahdanau", "luong", "transformer"]
ATTENTION_TYPES = sorted(p.stem for p in (CONF / "attention").glob("*.yaml"))


def eval_config(ckpt_path: Path, output_dir: Path, overrides: list[str] | tuple[str, ...] = ()):
    """eval.yaml as eval.py composes it for ``ckpt_path`` on the CPU, its ${hydra:...} paths given outside a
    Hydra run."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="eval", overrides=[f"ckpt_path={ckpt_path}", "accelerator=cpu", *overrides])
    with open_dict(cfg):
        cfg.paths.root_dir = str(ROOT)
        cfg.paths.output_dir = str(output_dir)
    return cfg


def options(group: str) -> list[str]:
    """The choices of a config group: its files in conf/<group>/."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def compose_train(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def resolve_paths(cfg):
    """Outside a Hydra run, give the ${hydra:...} paths a value so the config resolves."""
    with open_dict(cfg):
        cfg.pop("hydra", None)  # the job never sees Hydra's own node
    cfg.paths.root_dir = str(ROOT)
    cfg.paths.output_dir = "/tmp/attend-test-output"
    return cfg

