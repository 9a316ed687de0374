"""One W&B run per job: Attend's W&B logger (attention plots as image panels), the run's name, tags and group from
the config, its id read from the checkpoint a run resumes (``attend.callbacks.wandb_run_id`` saves it), and closed
when the job ends (the next job of a multirun runs in the same process). ``run_name`` also names the run's
TensorBoard folder (``attend.loggers.tensorboard_run``), so both dashboards call a run the same."""

from __future__ import annotations

import base64
import json
import logging
import netrc
import os
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from hydra.core.hydra_config import HydraConfig
from lightning.pytorch import loggers
from omegaconf import DictConfig, open_dict

from attend.callbacks.wandb_run_id import CHECKPOINT_KEY
from attend.checkpoints.files import UnreadableCheckpointError, read_checkpoint
from attend.config.errors import ConfigError
from attend.ranks import in_a_sweep

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

# the config groups that name and tag a run, in this order
NAMING_GROUPS = ("data", "encoder", "attention", "decoder")


class WandbLogger(loggers.WandbLogger):
    """Lightning's W&B logger; the attention plots become one image panel per example and a samples table."""

    def log_attention(self, figures: list[Figure], paths: list[str], rows: list[list[str]], step: int) -> None:
        for i, path in enumerate(paths):  # one panel per example: sizes differ, and a slider per panel
            self.log_image(key=f"val/attention/example_{i}", images=[path], step=step)
        self.log_table(key="val/samples", columns=["source", "reference", "output"], data=rows, step=step)

    def log_explorer(self, pages: list[dict], paths: list[str], step: int) -> None:
        """Each example's explorer page as HTML media beside its plot (``inject=False``: W&B's stylesheet link would
        be a fetch, and the page is whole without it)."""
        import wandb

        media = {}
        for i, path in enumerate(paths):
            media[f"val/explorer/example_{i}"] = wandb.Html(Path(path).read_text(encoding="utf-8"), inject=False)
        self.log_metrics(media, step=step)


def configure_wandb(cfg: DictConfig, choices: dict[str, str]) -> None:
    """Fill ``logger.wandb``'s name, tags and group where the config leaves them null, and its id
    from the checkpoint a run resumes from. ``choices``: the option picked in each config group."""
    wandb_cfg = (cfg.get("logger") or {}).get("wandb")
    if not wandb_cfg:
        return
    sweep = sweep_name()
    task = run_task(cfg, choices)
    with open_dict(wandb_cfg):
        if wandb_cfg.get("name") is None:
            wandb_cfg.name = run_name(cfg, choices)
        if wandb_cfg.get("tags") is None:
            tags = [f"task:{task}", *(f"{g}:{choices[g]}" for g in NAMING_GROUPS if g in choices)]
            wandb_cfg.tags = tags + ([f"sweep:{sweep}"] if sweep else [])
        if wandb_cfg.get("group") is None and sweep:
            wandb_cfg.group = sweep
        if wandb_cfg.get("mode") == "online":
            problem = online_problem()
            if problem:
                log.warning("W&B online logging is not possible: %s. Logging offline instead; upload later with "
                            "`wandb sync <run folder>/wandb/offline-run-*`", problem)
                wandb_cfg.mode = "offline"
        run_id = run_id_in_checkpoint(cfg.get("ckpt_path"))
        if run_id:
            log.info("resuming W&B run %s from the checkpoint", run_id)
            wandb_cfg.id = run_id  # WandbLogger resumes with resume="allow"


def run_task(cfg: DictConfig, choices: dict[str, str]) -> str:
    """The task chosen, also under debug=... (whose task_name is "debug")."""
    return choices.get("task", cfg.get("task_name"))


def run_name(cfg: DictConfig, choices: dict[str, str]) -> str:
    """A run's name in W&B and TensorBoard: ``<task>-<data>-<encoder>-<attention>-<decoder>`` from the options
    picked (``choices``), e.g. ``mt-dates-rnn-additive-luong``."""
    return "-".join([run_task(cfg, choices), *(choices[g] for g in NAMING_GROUPS if g in choices)])


def online_problem(timeout_seconds: float = 5.0) -> str | None:
    """Why W&B cannot log online (no API key, its server unreachable or refusing the key within
    ``timeout_seconds``), or None. Asked before wandb.init, which would retry for minutes or fail mid-run."""
    base_url = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").rstrip("/")
    host = urlsplit(base_url).hostname or ""
    key = os.environ.get("WANDB_API_KEY") or netrc_key(host)
    if not key:
        return f"no API key for {host} (run `wandb login`, or set WANDB_API_KEY)"
    request = urllib.request.Request(
        f"{base_url}/graphql", data=json.dumps({"query": "query { viewer { id } }"}).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Basic " + base64.b64encode(f"api:{key}".encode()).decode()},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            viewer = json.load(response).get("data", {}).get("viewer")
    except (OSError, ValueError) as error:  # URLError, HTTPError, timeouts and non-JSON answers
        return f"{base_url} did not answer as a W&B server ({error})"
    return None if viewer else f"{base_url} does not accept the API key"


def netrc_key(host: str) -> str | None:
    """The API key `wandb login` wrote to ~/.netrc for ``host``, if any."""
    try:
        entry = netrc.netrc().authenticators(host)
    except (FileNotFoundError, netrc.NetrcParseError):
        return None
    return entry[2] if entry else None


def sweep_name() -> str | None:
    """The sweep folder's name (its start time) in a Hydra multirun, else None: every job of a sweep shares it."""
    if not in_a_sweep():
        return None
    return Path(HydraConfig.get().sweep.dir).name


def run_id_in_checkpoint(ckpt_path: str | None) -> str | None:
    """The W&B run id a checkpoint was written under, or None (no checkpoint, or written without W&B)."""
    if not ckpt_path or not Path(ckpt_path).is_file():
        return None
    # mmap: the id without reading the weights into memory (Lightning loads them again to resume)
    try:
        checkpoint = read_checkpoint(ckpt_path, mmap=True)
    except UnreadableCheckpointError as error:
        raise ConfigError(str(error)) from error
    return checkpoint.get(CHECKPOINT_KEY)


def finish_wandb_run() -> None:
    """Close this process's W&B run, if any; otherwise the next job of a multirun would log into it."""
    import wandb

    if wandb.run is not None:
        wandb.finish()
