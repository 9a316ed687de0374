"""A config composed outside a Hydra run, as train.py, eval.py or predict.py compose theirs: the one way tests,
scripts and benchmarks build one (``compose_config``)."""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

# the checkout: src/attend/config/compose.py -> the folder holding conf/ and train.py
ROOT = Path(__file__).resolve().parents[3]
CONF_DIR = ROOT / "conf"


def temporary_output_dir(config_name: str) -> str:
    """A new temporary run folder, removed when the process ends if nothing was written there (most callers, a
    script that reads a config, write nothing: one empty folder per call piled up in /tmp)."""
    folder = tempfile.mkdtemp(prefix=f"attend-{config_name}-")
    atexit.register(_remove_if_empty, folder)
    return folder


def _remove_if_empty(folder: str) -> None:
    with contextlib.suppress(OSError):  # not empty (a caller wrote there: kept), or already gone
        os.rmdir(folder)


def compose_config(overrides: Sequence[str] = (), config_name: str = "train", output_dir: str | Path | None = None,
                   keep_hydra: bool = False) -> DictConfig:
    """The entry point's config with the command line's ``overrides``, from this checkout's conf/. Outside a run
    Hydra sets no working folder and no run folder, so the paths they name get values: ``paths.root_dir`` the
    checkout and ``paths.output_dir`` ``output_dir`` (None: a new temporary folder), unless the overrides set them.
    ``keep_hydra``: keep Hydra's own node (``hydra.runtime.choices``, the sweeper), which a run never sees."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
    given = {override.split("=", 1)[0].lstrip("+~") for override in overrides}
    if "paths.root_dir" not in given:
        cfg.paths.root_dir = str(ROOT)
    if "paths.output_dir" not in given:
        cfg.paths.output_dir = str(output_dir or temporary_output_dir(config_name))
    if not keep_hydra:
        with open_dict(cfg):
            cfg.pop("hydra")
    return cfg
