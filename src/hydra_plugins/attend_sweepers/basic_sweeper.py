"""``hydra/sweeper=attend``: Hydra's grid sweeper, but a failing job never stops the sweep."""

import time
from dataclasses import dataclass
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from hydra_plugins.attend_sweepers.sweep_report import finish_sweep, outcome_of, pinned_sweep_folder


@dataclass
class AttendSweeperConf:
    _target_: str = "hydra_plugins.attend_sweepers.basic_sweeper.AttendSweeper"
    max_batch_size: int | None = None
    params: dict[str, str] | None = None


ConfigStore.instance().store(group="hydra/sweeper", name="attend", node=AttendSweeperConf, provider="attend")


class AttendSweeper(BasicSweeper):
    """Every combination of the sweep's lists, as Hydra's basic sweeper; then ``sweep_summary.json``
    in the sweep folder, and exit status 1 naming each failed job (Hydra's own stops after the first
    batch with a failure and shows only that one)."""

    def sweep(self, arguments: list[str]) -> Any:
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides([*self._parse_config(), *arguments])
        self.overrides = self.split_arguments(overrides, self.max_batch_size)
        sweep_dir, pin_folder = pinned_sweep_folder(self.config)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        returns, outcomes, job_index = [], [], 0
        started = time.perf_counter()
        while not self.is_done():
            batch = [[*job, pin_folder] for job in self.get_job_batch()]
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=job_index)
            outcomes += [outcome_of(job_index + i, result) for i, result in enumerate(results)]
            job_index += len(batch)
            returns.append(results)
        finish_sweep(sweep_dir, outcomes, {"seconds": round(time.perf_counter() - started, 1)})
        return returns
