"""A ModelCheckpoint that a resume in a new run folder does not make forget its best."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

log = logging.getLogger("attend.run")


class ResumableCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint, except on a resume into another folder (Attend resumes into a new run folder):
    Lightning then keeps only ``best_model_path``, so the first epoch after the resume became "best" whatever its
    score, and the test and checkpoint averaging saw only the epochs after it. Here the whole history carries over:
    the best score, the top-k checkpoints (copied into the new folder, under their own names) and their scores, so a
    resumed run chooses, tests and averages exactly as if it had never stopped. A checkpoint file of the old folder
    that is gone is left out of the history, with a warning."""

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        old_folder = state_dict.get("dirpath", self.dirpath)
        if self.dirpath is None or old_folder is None or Path(old_folder) == Path(self.dirpath):
            super().load_state_dict(state_dict)
            return
        moved = {old: self._copied(old) for old in state_dict.get("best_k_models", {})}
        self.best_k_models = {moved[old]: score for old, score in state_dict["best_k_models"].items() if moved[old]}
        if self.best_k_models:
            self.best_model_path = moved.get(state_dict.get("best_model_path"), "") or ""
            self.best_model_score = state_dict.get("best_model_score") if self.best_model_path else None
            self.kth_best_model_path = moved.get(state_dict.get("kth_best_model_path"), "") or ""
            self.kth_value = state_dict.get("kth_value", self.kth_value)
        self.last_model_path = self._copied(state_dict.get("last_model_path") or "") or ""

    def _copied(self, old_path: str) -> str:
        """``old_path`` copied into this callback's folder under its own name; "" when there is no such file."""
        if not old_path:
            return ""
        source = Path(old_path)
        if not source.is_file():
            log.warning("resuming: %s, kept by %s before the resume, is gone; left out of the best checkpoints",
                        source, type(self).__name__)
            return ""
        target = Path(self.dirpath) / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():  # every DDP rank copies: each to its own name, renamed into place whole
            partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            shutil.copy2(source, partial)
            os.replace(partial, target)
        return str(target)


def latest_checkpoints_last(callbacks: list) -> list:
    """``callbacks`` with the checkpoints that keep the latest state (no monitor: last.ckpt) after the ones that choose
    by a score (best.ckpt, the kept for averaging). Lightning runs checkpoint callbacks in list order at the end of an
    epoch, so last.ckpt then holds the others' state after that epoch, not before it: a resume from it keeps the epoch
    they have just kept."""
    return sorted(callbacks, key=lambda callback: isinstance(callback, ModelCheckpoint) and callback.monitor is None)
