"""train(cfg): instantiate -> fit -> test -> return the monitored metric (Optuna reads it)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from attend.builder import build_datamodule, build_model, check_config, instantiate_all
from attend.callbacks import reference_text
from attend.distributed import in_a_sweep, is_global_zero, one_job_of_a_sweep, relaunch_ranks_as_this_job
from attend.parallel_jobs import device_slot
from attend.preemption import Preemption
from attend.resume import resolve_ckpt_path
from attend.wandb_run import configure_wandb, finish_wandb_run

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> float | None:
    """Fit, test the best checkpoint, write the run's files; returns the best monitored value."""
    check_config(cfg)
    output_dir = Path(cfg.paths.output_dir)
    with open_dict(cfg):  # ckpt_path=last or a run folder: the checkpoint file it means
        cfg.ckpt_path = resolve_ckpt_path(cfg.get("ckpt_path"), output_dir.parent, output_dir)
    if is_global_zero():  # DDP ranks share the job's folder; rank 0 writes it
        output_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, output_dir / "config_resolved.yaml", resolve=True)
    relaunch_ranks_as_this_job()
    configure_wandb(cfg, config_choices())
    L.seed_everything(cfg.seed, workers=True)
    with one_job_of_a_sweep(), device_slot(cfg) as slot:
        try:
            return fit_and_test(cfg, output_dir, slot)
        except Exception as error:
            # Hydra keeps a failed job's exception, not its traceback: put that in the job's log
            if in_a_sweep() and type(error).__name__ != "TrialPruned":  # a pruned Optuna trial is no failure
                log.exception("the job failed")
            raise
        finally:
            finish_wandb_run()


def fit_and_test(cfg: DictConfig, output_dir: Path, slot: int | None = None) -> float | None:
    """The run itself; ``slot``: the device slot of a parallel sweep job (recorded in summary.json)."""
    datamodule = build_datamodule(cfg)
    datamodule.prepare_data()
    datamodule.setup("fit")
    model = build_model(cfg, datamodule)
    trainer: L.Trainer = instantiate(
        cfg.trainer,
        callbacks=instantiate_all(cfg.get("callbacks")),
        logger=instantiate_all(cfg.get("logger")),
    )
    skipped = datamodule.skip_summary()  # every data module reports its bad samples (data.bad_samples.ReportsSkips)
    for logger in trainer.loggers:  # the whole resolved config and the bad samples skipped, on the dashboard too
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        if skipped:
            logger.log_metrics(skipped, step=0)
    started_at, started = time.time(), time.perf_counter()
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    fit_seconds = time.perf_counter() - started
    if preempted(trainer):
        return None  # the checkpoint is written and the message logged; no test of an unfinished run
    # read before testing: trainer.test replaces the callback metrics with the test ones
    val_metrics = {k: float(v) for k, v in sorted(trainer.callback_metrics.items()) if k.startswith("val/")}
    monitored = trainer.callback_metrics.get(cfg.monitor.metric)
    checkpoint = trainer.checkpoint_callback
    if checkpoint is not None and checkpoint.best_model_score is not None:
        monitored = checkpoint.best_model_score

    test_metrics = {}
    if cfg.get("run_test"):
        best = "best" if checkpoint is not None and checkpoint.best_model_path else None
        test_metrics = trainer.test(model, datamodule=datamodule, ckpt_path=best, verbose=False)[0]
    monitored = None if monitored is None else float(monitored)
    if trainer.is_global_zero:
        if test_metrics:
            write_results(output_dir, test_metrics, model.test_predictions)
        timing = {"started_at": started_at, "finished_at": time.time(), "fit_seconds": round(fit_seconds, 1)}
        write_summary(
            output_dir, trainer, model, timing | {"device_slot": slot}, cfg.monitor.metric, monitored,
            val_metrics, test_metrics,
        )
        report(output_dir, test_metrics, checkpoint)
    return monitored


def preempted(trainer: L.Trainer) -> bool:
    """Whether a SIGTERM or SIGUSR1 stopped the fit (the Preemption callback saved a checkpoint)."""
    return any(isinstance(c, Preemption) and c.saved is not None for c in trainer.callbacks)


def write_summary(
    output_dir: Path, trainer: L.Trainer, model: L.LightningModule, timing: dict, monitor: str,
    monitored: float | None, val_metrics: dict, test_metrics: dict,
) -> None:
    """``summary.json``: what comparisons of runs read (training time, steps, size, the last validation
    metrics, the best monitored value and the test metrics). ``timing``: fit_seconds, started_at and
    finished_at (Unix time), device_slot (of a parallel sweep job)."""
    summary = {
        "choices": config_choices(),
        "overrides": command_line_overrides(),
        **timing,
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "parameters": sum(p.numel() for p in model.parameters()),
        "monitor": {"metric": monitor, "best": monitored},
        "val": val_metrics,
        "test": test_metrics,
    }
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def write_results(output_dir: Path, metrics: dict, predictions: list[dict]) -> None:
    """Test metrics as JSON and the decoded test set as TSV in the run folder."""
    (output_dir / "test_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    ordered = sorted(predictions, key=lambda p: p["id"])  # batches come sorted by length; restore file order
    lines = ["source\treference\thypothesis"] + [
        f"{p['source']}\t{reference_text(p['reference'])}\t{p['hypothesis']}" for p in ordered
    ]
    (output_dir / "test_predictions.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def config_choices() -> dict[str, str]:
    """The option picked in each config group (task, data, encoder, attention, decoder, ...), when run by Hydra."""
    if not HydraConfig.initialized():
        return {}
    choices = HydraConfig.get().runtime.choices
    # the groups a user picks; not Hydra's own, not the task tuning that follows them, not the unset ones
    return {
        group: str(option) for group, option in choices.items()
        if option is not None and not group.startswith(("hydra", "task_tuning"))
    }


def command_line_overrides() -> dict[str, str]:
    """This run's ``key=value`` overrides (a sweep's job: its own values), when run by Hydra."""
    if not HydraConfig.initialized():
        return {}
    pairs = (override.split("=", 1) for override in HydraConfig.get().overrides.task if "=" in override)
    return {key.lstrip("+~"): value for key, value in pairs}


def report(output_dir: Path, test_metrics: dict, checkpoint) -> None:
    """Print where everything landed, for a person reading the terminal."""
    print("\n=== Attend run finished ===")
    for name, value in sorted(test_metrics.items()):
        print(f"{name:>14}: {value:.4f}")
    if checkpoint is not None and checkpoint.best_model_path:
        print(f"best checkpoint: {checkpoint.best_model_path}")
    print(f"run folder:      {output_dir}")
    print(f"attention plots: {output_dir / 'attention'}")
