"""The checkpoints ``average_checkpoints`` averages, kept while training in ``checkpoints/average/``, and their
average that training tests (``attend.checkpoints.averaging`` averages them)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig

from attend.callbacks.resumable_checkpoint import ResumableCheckpoint
from attend.checkpoints.averaging import (
    AVERAGE_FOLDER,
    AVERAGED_FILE,
    AverageOptions,
    averaged_checkpoint,
    choose,
    describe,
    read_kept,
    write,
)

log = logging.getLogger(__name__)


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


def averaged_for_test(trainer: L.Trainer, keeper: KeepForAveraging, options: AverageOptions) -> str:
    """After the fit: average the checkpoints ``keeper`` kept, write ``checkpoints/averaged.ckpt`` (global rank 0;
    every rank chooses, so a refusal is the same on all) and return its path for ``trainer.test``."""
    folder = Path(str(keeper.dirpath))
    path = folder.parent / AVERAGED_FILE
    chosen = choose(read_kept(folder), options.select, options.n, folder)
    if trainer.is_global_zero:
        write(averaged_checkpoint(chosen), path)
        log.info("test on %s", describe(chosen, options.select))
    trainer.strategy.barrier("averaged checkpoint written")
    return str(path)


def keep_for_averaging(cfg: DictConfig) -> list[L.Callback]:
    """The callback that keeps the checkpoints to average in ``checkpoints/average/`` (none when off)."""
    options = AverageOptions.of(cfg.get("average_checkpoints"))
    if options is None:
        return []
    folder = Path(cfg.paths.output_dir) / "checkpoints" / AVERAGE_FOLDER
    return [KeepForAveraging(folder, options.select, options.n, cfg.monitor.metric, cfg.monitor.mode)]


def averaged_test_checkpoint(trainer: L.Trainer, cfg: DictConfig) -> str | None:
    """The averaged checkpoint training tests (``averaged_for_test``); None when averaging is off."""
    options = AverageOptions.of(cfg.get("average_checkpoints"))
    keeper = next((c for c in trainer.callbacks if isinstance(c, KeepForAveraging)), None)
    if options is None or keeper is None:
        return None
    return averaged_for_test(trainer, keeper, options)
