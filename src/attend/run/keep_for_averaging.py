"""The checkpoints ``average_checkpoints`` averages, kept while training in ``checkpoints/average/``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attend.callbacks.resumable_checkpoint import ResumableCheckpoint

AVERAGE_FOLDER = "average"  # beside best.ckpt and last.ckpt: checkpoints/average/epoch=E-step=S.ckpt


class KeepForAveraging(ResumableCheckpoint):
    """Keeps the ``n`` checkpoints to average: ``select="best"``, the n best by the monitored metric (save_top_k=n on
    it); ``select="last"``, the n latest epochs (the top n by the step, mode max: Lightning's recipe for the last n,
    as it refuses save_top_k > 1 without a monitor). A ModelCheckpoint of its own, so best.ckpt and last.ckpt stay as
    they are. Each file it writes records in this callback's state what it was kept for (``average_select``,
    ``average_mode``) and its own score (``current_score``: ModelCheckpoint sets it before it saves), so the folder
    alone tells eval.py which files to average, long after the run. A resume keeps them all (``ResumableCheckpoint``).
    """

    def __init__(self, dirpath: str | Path, select: str, n: int, monitor: str, mode: str) -> None:
        best = select == "best"
        super().__init__(
            dirpath=dirpath,
            filename="epoch={epoch}-step={step}",
            monitor=monitor if best else "step",
            mode=mode if best else "max",
            save_top_k=n,
            auto_insert_metric_name=False,
            enable_version_counter=False,
        )
        self.select = select

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "average_select": self.select, "average_mode": self.mode}
