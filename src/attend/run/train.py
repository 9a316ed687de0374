"""train(cfg): build -> fit -> test -> return the monitored metric (Optuna reads it). What surrounds the run is
run_context's (attend.run.context); the run's files are RunSummary's (attend.callbacks.run_summary)."""

from __future__ import annotations

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attend.builder import build_datamodule, build_model, instantiate_all, run_extraction_device, share_frozen_features
from attend.callbacks import latest_checkpoints_last
from attend.callbacks.keep_for_averaging import averaged_test_checkpoint, keep_for_averaging
from attend.callbacks.run_summary import RunSummary
from attend.checkpoints.files import read_checkpoint
from attend.checkpoints.init_from import init_from_config
from attend.checkpoints.resume import check_same_tokenizers
from attend.run.context import run_context


def train(cfg: DictConfig) -> float | None:
    """Fit, test the best checkpoint (or the average of several: ``average_checkpoints``); returns the best
    monitored value, or None when the fit was stopped early to be resumed (its checkpoint is written and the
    message logged; an unfinished run is not tested)."""
    with run_context(cfg) as device_slot:
        # a resume's checkpoint is read first, as data: a file that would run code is refused in one line, here
        resumed = read_checkpoint(cfg.ckpt_path, mmap=True) if cfg.get("ckpt_path") else None
        datamodule = build_datamodule(cfg)
        datamodule.prepare_data()
        datamodule.setup("fit")
        if resumed is not None:
            check_same_tokenizers(resumed, datamodule, cfg.ckpt_path)
        model = build_model(cfg, datamodule, share_features=False)
        init_from_config(model, cfg)  # fine-tuning: model.init_from's weights (a resume restores its own instead)
        # from the weights the model trains with, on the accelerator it trains on
        share_frozen_features(model.encoder, datamodule, run_extraction_device(cfg))
        run_test = bool(cfg.get("run_test"))
        summary = RunSummary(cfg.paths.output_dir, cfg.monitor.metric, tested=run_test, device_slot=device_slot)
        trainer = build_trainer(cfg, datamodule, summary)
        summary.start_clock()
        trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"), weights_only=True)
        if summary.interrupted:
            return None
        if run_test:
            trainer.test(model, datamodule=datamodule, ckpt_path=tested_checkpoint(trainer, cfg), verbose=False,
                         weights_only=True)
        return summary.monitored


def build_trainer(cfg: DictConfig, datamodule: L.LightningDataModule, *callbacks: L.Callback) -> L.Trainer:
    """The configured Trainer, with the config's callbacks (and the one that keeps the checkpoints
    ``average_checkpoints`` averages) and ``callbacks``; its loggers (the dashboard) get the whole resolved
    config and the counts of bad samples the data module skipped."""
    trainer: L.Trainer = instantiate(
        cfg.trainer,
        callbacks=latest_checkpoints_last(instantiate_all(cfg.get("callbacks")) + keep_for_averaging(cfg)),
        logger=instantiate_all(cfg.get("logger")),
    )
    # after Lightning's own callbacks: the progress bar is closed before RunSummary prints where the run landed
    trainer.callbacks.extend(callbacks)
    skipped = datamodule.skip_summary()  # every data module reports its bad samples (data.bad_samples.ReportsSkips)
    for logger in trainer.loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        if skipped:
            logger.log_metrics(skipped, step=0)
    return trainer


def best_checkpoint(trainer: L.Trainer) -> str | None:
    """``best`` when the fit wrote a best checkpoint (Lightning then tests it), else None (the last weights)."""
    checkpoint = trainer.checkpoint_callback
    return "best" if checkpoint is not None and checkpoint.best_model_path else None


def tested_checkpoint(trainer: L.Trainer, cfg: DictConfig) -> str | None:
    """What the test loads: the average of the kept checkpoints when ``average_checkpoints`` is on, else best."""
    return averaged_test_checkpoint(trainer, cfg) or best_checkpoint(trainer)
