"""Loggers that show attention plots: Lightning's W&B and TensorBoard loggers, each logging them its own way.

The plots callback asks every logger of the run for ``log_attention`` (``attend.callbacks.AttentionLogger``, the
protocol these implement), so a logger that can show plots says how, and one that cannot (CSV) is passed over;
no ladder over logger classes. The TensorBoard logger also names its run folder like the W&B run and writes one
HParams session per run, so a sweep can be compared in TensorBoard's HParams tab.
"""

from __future__ import annotations

import io
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from lightning.fabric.utilities.logger import _convert_params
from lightning.pytorch import loggers
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf, open_dict
from PIL import Image

from attend.config.hydra_choices import command_line_overrides, config_choices
from attend.explore.animation import steps_animation
from attend.loggers.wandb_run import run_name
from attend.ranks import in_a_sweep

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from tensorboard.compat.proto.summary_pb2 import Summary

log = logging.getLogger(__name__)

HParam = str | int | float | bool


class TensorBoardLogger(loggers.TensorBoardLogger):
    """Lightning's TensorBoard logger; the attention plots become figures and the samples one text. At the end of
    the run (after the test when ``tested``, else after the fit) it writes the run's HParams session into its own
    folder: the options picked in each config group but ``hparam_groups_left_out`` (``attention: additive``), the
    config values at ``hparam_keys`` and at the keys set on the command line (those a sweep varies marked, so
    TensorBoard shows them first), and as its metrics the best validation value of ``monitor`` (the scalar
    ``<monitor>_best``, best by ``mode``) and every ``test/`` metric, the monitored one first. A run stopped
    before then (a failure, a preemption to be resumed) writes no session. No ``hp_metric``."""

    def __init__(
        self, *args: Any, monitor: str | None = None, mode: str = "min", tested: bool = True,
        hparam_keys: Sequence[str] = (), hparam_groups_left_out: Sequence[str] = (), **kwargs: Any,
    ) -> None:
        kwargs.setdefault("default_hp_metric", False)
        super().__init__(*args, **kwargs)
        self.monitor, self.mode, self.tested = monitor, mode, tested
        self.hparam_keys, self.hparam_groups_left_out = list(hparam_keys), set(hparam_groups_left_out)
        self.session_hparams: dict[str, HParam] = {}
        self.started = time.time()
        self.best: float | None = None
        self.test_metrics: dict[str, float] = {}
        self.last_step = 0
        self.session_written = False

    def log_attention(self, figures: list[Figure], paths: list[str], rows: list[list[str]], step: int) -> None:
        for i, fig in enumerate(figures):
            self.experiment.add_figure(f"val/attention/{i}", fig, global_step=step, close=False)
        self.experiment.add_text("val/samples", "\n\n".join(" | ".join(r) for r in rows), global_step=step)

    def log_explorer(self, pages: list[dict], paths: list[str], step: int) -> None:
        """TensorBoard shows no HTML: each page's search steps as an animated GIF (its image panel plays GIFs)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        for i, page in enumerate(pages):
            gif = steps_animation(page)
            width, height = Image.open(io.BytesIO(gif)).size
            image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif)
            summary = Summary(value=[Summary.Value(tag=f"val/explorer/example_{i}", image=image)])
            self.experiment.file_writer.add_summary(summary, global_step=step)

    @rank_zero_only
    def log_hyperparams(self, params: Any, metrics: dict[str, Any] | None = None, step: int | None = None) -> None:
        super().log_hyperparams(params, metrics, step)  # hparams.yaml; no hp_metric, no session yet
        params = _convert_params(params)
        if params:  # the run's config (attend.run.train); Lightning also passes the model's empty hparams
            self.session_hparams.update(run_hparams(params, self.hparam_keys, self.hparam_groups_left_out))

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics(metrics, step)
        for name, value in metrics.items():
            if name == self.monitor and not math.isnan(value := float(value)):
                self.best = value if self.best is None or self.better(value) else self.best
            elif name.startswith("test/") and not isinstance(value, Mapping):
                self.test_metrics[name] = float(value)
        if step is not None:
            self.last_step = step

    def better(self, value: float) -> bool:
        return value > self.best if self.mode == "max" else value < self.best

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if status == "success" and not self.session_written and (self.test_metrics or not self.tested):
            self.write_session()
        super().finalize(status)  # closes the event file

    def write_session(self) -> None:
        """The HParams session in the run's folder, where the metrics' scalars are too: the plugin shows each
        metric's last value in the session's folder. Written once: TensorBoard keeps only a tag's first metadata."""
        metrics = sorted(self.test_metrics, key=lambda tag: (tag != f"test/{self.monitor_name}", tag))
        if self.best is not None:
            best_tag = f"{self.monitor}_best"
            self.experiment.add_scalar(best_tag, self.best, self.last_step)
            metrics.insert(0, best_tag)
        writer = self.experiment._get_file_writer()  # the run's own folder (SummaryWriter.add_hparams makes a new one)
        for summary in session_summaries(self.session_hparams, metrics, swept_keys(), self.started):
            writer.add_summary(summary, self.last_step)
        self.session_written = True

    @property
    def monitor_name(self) -> str:
        """The monitored metric without its stage: ``exact`` of ``val/exact``."""
        return (self.monitor or "").rpartition("/")[2]


def run_hparams(config: Mapping[str, Any], keys: Sequence[str], groups_left_out: set[str]) -> dict[str, HParam]:
    """What the HParams tab shows of a run: the option picked in each config group but ``groups_left_out``
    (``attention: additive``, from Hydra's runtime choices), then the values at ``keys`` and at the keys set on
    the command line (a sweep's swept values), where they are single values; None reads ``null``."""
    choices = config_choices()
    hparams: dict[str, HParam] = {group: option for group, option in choices.items() if group not in groups_left_out}
    for key in [*keys, *(k for k in command_line_overrides() if k not in choices)]:
        found, value = value_at(config, key)
        if found and not isinstance(value, Mapping | list | tuple):
            hparams[key] = "null" if value is None else value
    return hparams


def swept_keys() -> set[str]:
    """The keys and groups the sweep of this job varies (``attention`` of ``attention=additive,dot``, the keys of
    its sweeper's ``params``), from the sweep folder's ``multirun.yaml``, which the sweepers write before the
    first job; empty outside a sweep."""
    path = Path(HydraConfig.get().sweep.dir) / "multirun.yaml" if in_a_sweep() else None
    if path is None or not path.is_file():
        return set()
    sweep = OmegaConf.to_container(OmegaConf.load(path).hydra, resolve=False)
    params = sweep["sweeper"].get("params") or {}
    overrides = [*sweep["overrides"]["task"], *(f"{key}={value}" for key, value in params.items())]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException as error:  # not this job's to fail: the HParams tab just marks nothing
        log.warning("cannot tell what the sweep varies from %s: %s", path, error)
        return set()
    return {override.key_or_group for override in parsed if override.is_sweep_override()}


def session_summaries(hparams: dict[str, HParam], metrics: list[str], swept: set[str], started: float) -> list[Summary]:
    """The HParams plugin's three summaries of one run: the experiment (which hparams and metrics the tab shows;
    the ``swept`` ones marked ``differs``, so it lists and ticks them first), the session's start (this run's
    values) and its end."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo

    start, infos = SessionStartInfo(start_time_secs=started), []
    for name, value in hparams.items():
        if isinstance(value, bool):
            start.hparams[name].bool_value, kind = value, api_pb2.DATA_TYPE_BOOL
        elif isinstance(value, int | float):
            start.hparams[name].number_value, kind = value, api_pb2.DATA_TYPE_FLOAT64
        else:
            start.hparams[name].string_value, kind = str(value), api_pb2.DATA_TYPE_STRING
        infos.append(api_pb2.HParamInfo(name=name, type=kind, differs=name in swept))
    experiment = api_pb2.Experiment(
        time_created_secs=started, hparam_infos=infos,
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in metrics],
    )
    end = SessionEndInfo(status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time())
    parts = {
        metadata.EXPERIMENT_TAG: HParamsPluginData(experiment=experiment),
        metadata.SESSION_START_INFO_TAG: HParamsPluginData(session_start_info=start),
        metadata.SESSION_END_INFO_TAG: HParamsPluginData(session_end_info=end),
    }
    return [
        Summary(value=[Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data),
                                     tensor=metadata.NULL_TENSOR)])
        for tag, data in parts.items()
    ]


def value_at(config: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """``(True, value)`` at the dotted ``key`` of a nested dict, or ``(False, None)`` when there is none."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def configure_tensorboard(cfg: DictConfig, choices: dict[str, str]) -> None:
    """Name ``logger.tensorboard``'s run folder (its ``sub_dir``, when null) like the W&B run, so TensorBoard's
    run list reads ``<job>/tensorboard/mt-dates-rnn-additive-luong``. ``choices``: the option picked in each group.
    (Its ``version`` stays empty: the progress bar would show that name's last four letters as ``v_num``.)"""
    tensorboard_cfg = (cfg.get("logger") or {}).get("tensorboard")
    if tensorboard_cfg and tensorboard_cfg.get("sub_dir") is None:
        with open_dict(tensorboard_cfg):
            tensorboard_cfg.sub_dir = run_name(cfg, choices)
