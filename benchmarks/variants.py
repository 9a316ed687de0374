"""The training variants compared (A, B, C, D, D-bucketed), built from one config and one data set."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import lightning as L
import torch
from omegaconf import DictConfig

from attend.builder import build_model
from benchmarks.memory import PeakMeter
from benchmarks.setup import Data, bucketed_batches, load_config, prepare_data, random_batches
from benchmarks.training import PlainLoop, batch_loader, naive_trainer, plain_copy, trainer_for

VARIANTS = {
    "A": "Attend: LightningModule in the Lightning Trainer",
    "B": "A's nn.Module (deep copy) in a plain PyTorch loop",
    "C": "Attend with the Bahdanau flow, plain loop (flow ablation)",
    "D": "tutorial implementation, random batches",
    "D_bucketed": "tutorial implementation on A's bucketed batches (bucketing ablation)",
}


def quiet() -> None:
    """No Lightning banners and tips between the tables (the benchmark turns the features they name off)."""
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*(val_dataloader|LeafSpec|litlogger).*")


def bahdanau_overrides(overrides: list[str]) -> list[str]:
    """The same overrides with the Bahdanau flow in place of the configured decoder."""
    kept = [o for o in overrides if not o.startswith(("decoder=", "decoder.input_feeding"))]
    return [*kept, "decoder=bahdanau"]


@dataclass
class Bench:
    """Config, data and each variant's batches (A, B and C share the bucketed ones)."""

    cfg: DictConfig
    cfg_bahdanau: DictConfig
    data: Data
    device: torch.device
    batches: dict[str, list[dict]]

    @classmethod
    def prepare(cls, overrides: list[str], min_len: int, max_len: int, count: int, device: str) -> Bench:
        cfg = load_config(overrides)
        data = prepare_data(cfg, min_len, max_len)
        size, seed = cfg.data.loader.batch_size, cfg.seed
        bucketed = bucketed_batches(data, size, count, seed)
        randomly = random_batches(data, size, count, seed)
        batches = {"A": bucketed, "B": bucketed, "C": bucketed, "D": randomly, "D_bucketed": bucketed}
        return cls(cfg, load_config(bahdanau_overrides(overrides)), data, torch.device(device), batches)

    def attend_module(self, bahdanau: bool = False):
        """A freshly initialised Attend model (seeded: the same weights every time)."""
        L.seed_everything(self.cfg.seed, verbose=False)
        return build_model(self.cfg_bahdanau if bahdanau else self.cfg, self.data.datamodule)

    def steppers(self, module, names: list[str], total_steps: int) -> dict:
        """The step functions of the plain-loop variants ``names`` (B copies ``module``)."""
        clip = self.cfg.trainer.gradient_clip_val
        steppers = {}
        for name in names:
            if name == "B":
                steppers[name] = plain_copy(module, total_steps, clip, self.device).step
            elif name == "C":
                steppers[name] = PlainLoop(self.attend_module(bahdanau=True), total_steps, clip, self.device).step
            else:
                L.seed_everything(self.cfg.seed, verbose=False)
                steppers[name] = naive_trainer(self.cfg, self.data.datamodule.tokenizers(), self.device).step
        return steppers


def padded_size(batch: dict) -> int:
    """Padded source x target positions: what a step's activations grow with."""
    return batch["src"].numel() * batch["tgt"].size(1)


def variant_peak(
    name: str, overrides: list[str], min_len: int, max_len: int, count: int, steps: int, device: str, queue
) -> None:
    """In a fresh process: the peak memory of ``steps`` training steps of one variant on its largest batches."""
    quiet()
    bench = Bench.prepare(overrides, min_len, max_len, count, device)
    batches = sorted(bench.batches[name], key=padded_size, reverse=True)[:steps]
    meter = PeakMeter(bench.device)
    if name == "A":
        module = bench.attend_module().to(bench.device)
        trainer = trainer_for(bench.cfg, steps, [], bench.device)
        loader = batch_loader(batches)
        meter.start()
        trainer.fit(module, train_dataloaders=loader)
    else:
        step = bench.steppers(bench.attend_module() if name == "B" else None, [name], steps)[name]
        meter.start()
        for batch in batches:
            step(batch)
    queue.put({"peak_mb": meter.megabytes()})
