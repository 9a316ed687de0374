"""Which checkpoint a resume continues from (``ckpt_path=last``, a run folder, a file), and the check that it
continues the same run (the same tokenizers)."""

from __future__ import annotations

from pathlib import Path

from attend.checkpoints.saved_run import datamodule_state
from attend.config.errors import ConfigError


def resolve_ckpt_path(ckpt_path: str | None, runs_folder: Path, this_run: Path) -> str | None:
    """``last``: the newest ``checkpoints/last.ckpt`` of an earlier run under ``runs_folder``; a run folder:
    its ``checkpoints/last.ckpt``; a file: itself. A path that is not there is a ConfigError naming it."""
    if ckpt_path is None:
        return None
    if ckpt_path == "last":
        candidates = [p for p in runs_folder.glob("*/checkpoints/last.ckpt") if this_run not in p.parents]
        if not candidates:
            raise ConfigError(
                f"ckpt_path=last: no run under {runs_folder} has checkpoints/last.ckpt; give the checkpoint's "
                f"path (ckpt_path=outputs/<task>/runs/<time>/checkpoints/last.ckpt) or drop ckpt_path"
            )
        return str(max(candidates, key=lambda p: p.stat().st_mtime))
    path = Path(ckpt_path)
    if path.is_dir() and (path / "checkpoints" / "last.ckpt").is_file():
        return str(path / "checkpoints" / "last.ckpt")
    if not path.is_file():
        raise ConfigError(
            f"ckpt_path={ckpt_path}: no such checkpoint; give a .ckpt file, a run folder with checkpoints/last.ckpt, "
            f"or ckpt_path=last for the newest run of this task"
        )
    return str(path)


def check_same_tokenizers(checkpoint: dict, datamodule, ckpt_path) -> None:
    """A resume continues the run it resumes: the tokenizers this config fits must be the checkpoint's. Otherwise the
    data module would take the checkpoint's while the model kept the new ones, and with vocabularies of one size the
    weights would load and everything decode with the wrong tokens: refused in one line."""
    saved = datamodule_state(checkpoint, ckpt_path)
    if saved != datamodule.state_dict():
        raise ConfigError(
            f"ckpt_path={ckpt_path}: its tokenizers differ from the ones this config fits on its data (the data or "
            "the tokenizer settings changed since that run): resume with the run's own config, or start a new run "
            "from its weights with model.init_from=... (token layers are matched by token)")
