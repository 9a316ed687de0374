"""Checkpoint averaging, as fairseq's scripts/average_checkpoints.py and SpeechBrain's average_checkpoints do: the
mean of the weights of a run's last N or best N checkpoints, which often decodes better than any one of them.

``average_checkpoints: {select: best|last, n: N}`` (train.yaml and eval.yaml; select null: off). Training keeps
those N checkpoints in ``checkpoints/average/`` (``KeepForAveraging``) and tests their average, written as
``checkpoints/averaged.ckpt``, instead of best.ckpt; eval.py averages the ones kept beside the checkpoint it is
given and writes ``averaged.ckpt`` into its run folder. Floating-point tensors of the state dict are averaged
(parameters, and buffers such as BatchNorm's running statistics); every other tensor (integer buffers: BatchNorm's
``num_batches_tracked``) and everything else of the checkpoint (config, tokenizers, epoch) is the newest chosen
checkpoint's. The averaged file holds no optimizer state: it is for testing and decoding, not for resuming.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import Tensor

from attend.checkpoints.files import AtomicCheckpointIO, UnreadableCheckpointError, read_checkpoint
from attend.checkpoints.saved_run import SavedRun, load_run
from attend.config.errors import ConfigError

log = logging.getLogger(__name__)

AVERAGE_FOLDER = "average"  # beside best.ckpt and last.ckpt: checkpoints/average/epoch=E-step=S.ckpt
AVERAGED_FILE = "averaged.ckpt"
TRAINING_ONLY = ("optimizer_states", "lr_schedulers")  # what an averaged checkpoint leaves out


@dataclass(frozen=True)
class AverageOptions:
    """``average_checkpoints``: ``select`` best (by the monitored metric) or last (epochs), ``n`` how many."""

    select: str
    n: int

    @classmethod
    def of(cls, node: DictConfig | dict | None) -> AverageOptions | None:
        """The options of a config's ``average_checkpoints`` node (checked by ``check_config``); None when off."""
        if node is None or node.get("select") is None:
            return None
        return cls(str(node["select"]), int(node["n"]))


@dataclass(frozen=True)
class Kept:
    """One checkpoint KeepForAveraging wrote: its file, when, what for and its score (the monitored metric's
    value for select=best, the step for select=last)."""

    path: Path
    epoch: int
    step: int
    select: str
    mode: str
    score: float

    @property
    def age(self) -> tuple[int, int]:
        return self.epoch, self.step


def kept_folder(ckpt_path: str | Path) -> Path:
    """Where the checkpoints to average are, given one checkpoint of the run (best.ckpt, last.ckpt, or one of the
    kept ones): ``checkpoints/average/``."""
    path = Path(ckpt_path)
    return path.parent if path.parent.name == AVERAGE_FOLDER else path.parent / AVERAGE_FOLDER


def read_kept(folder: Path) -> list[tuple[Kept, dict]]:
    """Every checkpoint KeepForAveraging wrote in ``folder``, with its contents (memory-mapped, read as needed)."""
    found = []
    for path in sorted(folder.glob("*.ckpt")) if folder.is_dir() else []:
        try:
            checkpoint = read_checkpoint(path, mmap=True)
        except UnreadableCheckpointError as error:
            raise ConfigError(f"cannot average {str(path)!r}: {error}") from error
        states = checkpoint.get("callbacks", {}) if isinstance(checkpoint, dict) else {}
        state = next((s for s in states.values() if isinstance(s, dict) and "average_select" in s), None)
        if state is None or "state_dict" not in checkpoint:
            log.warning("%s was not kept for averaging (no KeepForAveraging state): left out", path)
            continue
        score = state.get("current_score")
        kept = Kept(path, int(checkpoint.get("epoch", 0)), int(checkpoint.get("global_step", 0)),
                    state["average_select"], state["average_mode"], float("nan") if score is None else float(score))
        found.append((kept, checkpoint))
    return found


def choose(found: list[tuple[Kept, dict]], select: str, n: int, folder: Path) -> list[tuple[Kept, dict]]:
    """The ``n`` best (by score) or last (by epoch and step) of the checkpoints kept for ``select``, oldest first;
    fewer when fewer are kept (said in a log line), a ConfigError when none is."""
    matching = [item for item in found if item[0].select == select]
    if not matching:
        if found:
            other = found[0][0].select
            raise ConfigError(
                f"{folder} holds the {other} {len(found)} checkpoints (the run kept them for "
                f"average_checkpoints.select={other}), not the {select} ones: set average_checkpoints.select={other}"
            )
        raise ConfigError(
            f"no checkpoints to average in {folder}: a run keeps them there when trained with "
            f"average_checkpoints.select=best or last (and checkpoints on); evaluate best.ckpt without averaging"
        )
    if select == "last":
        ordered = sorted(matching, key=lambda item: item[0].age, reverse=True)
    else:
        ordered = sorted(matching, key=lambda item: item[0].score, reverse=matching[0][0].mode == "max")
    if len(matching) < n:
        log.info("average_checkpoints.n=%d, but %s holds %d %s checkpoints: averaging those %d",
                 n, folder, len(matching), select, len(matching))
    return sorted(ordered[:n], key=lambda item: item[0].age)


@torch.no_grad()
def average_state_dicts(state_dicts: list[dict]) -> dict:
    """The mean of each floating-point tensor over ``state_dicts`` (summed in float64, kept in its own dtype);
    every other entry (integer buffers such as BatchNorm's num_batches_tracked) is the last one's, the newest."""
    newest = state_dicts[-1]
    averaged = {}
    for name, value in newest.items():
        if not (isinstance(value, Tensor) and value.is_floating_point()):
            averaged[name] = value.clone() if isinstance(value, Tensor) else value
            continue
        total = torch.zeros(value.shape, dtype=torch.float64)
        for state in state_dicts:
            other = state.get(name)
            if not isinstance(other, Tensor) or other.shape != value.shape:
                raise ConfigError(f"cannot average the checkpoints: {name} is missing from one of them or has another "
                                  "shape; average checkpoints of one run only")
            total += other.to(torch.float64)
        averaged[name] = (total / len(state_dicts)).to(value.dtype)
    return averaged


def averaged_checkpoint(chosen: list[tuple[Kept, dict]]) -> dict:
    """The newest chosen checkpoint with the averaged weights, the names of the files averaged under
    ``attend.averaged_from``, and no optimizer or scheduler state."""
    newest = chosen[-1][1]
    checkpoint = {key: value for key, value in newest.items() if key not in TRAINING_ONLY}
    checkpoint["state_dict"] = average_state_dicts([contents["state_dict"] for _, contents in chosen])
    checkpoint["attend"] = {**newest.get("attend", {}), "averaged_from": [kept.path.name for kept, _ in chosen]}
    return checkpoint


def describe(chosen: list[tuple[Kept, dict]], select: str) -> str:
    """``the average of 3 best checkpoints: epoch=2-step=60, epoch=4-step=100, epoch=5-step=120``"""
    names = ", ".join(kept.path.stem for kept, _ in chosen)
    return f"the average of {len(chosen)} {select} checkpoint{'s' * (len(chosen) != 1)}: {names}"


def average_kept(folder: Path, options: AverageOptions) -> tuple[dict, str]:
    """The averaged checkpoint of what ``options`` choose among the checkpoints kept in ``folder``, and which."""
    chosen = choose(read_kept(folder), options.select, options.n, folder)
    return averaged_checkpoint(chosen), describe(chosen, options.select)


def write(checkpoint: dict, path: Path) -> None:
    """Written whole or not at all, and never with NaN weights (AtomicCheckpointIO)."""
    AtomicCheckpointIO().save_checkpoint(checkpoint, path)


def evaluated_run(ckpt_path: str | Path, cfg: DictConfig, options: AverageOptions | None, output_dir: Path) -> SavedRun:
    """What eval.py tests: the run saved at ``ckpt_path``, or with ``options`` the average of the checkpoints kept
    beside it (``checkpoints/average/``), written as ``averaged.ckpt`` into eval.py's run folder and read back from
    there; either with eval.py's overrides (``cfg``) applied to its config."""
    run = load_run(ckpt_path, cfg)
    if options is None:
        return run
    averaged, said = average_kept(kept_folder(ckpt_path), options)
    write(averaged, output_dir / AVERAGED_FILE)
    log.info("evaluating %s (written as %s)", said, output_dir / AVERAGED_FILE)
    return load_run(output_dir / AVERAGED_FILE, cfg)
