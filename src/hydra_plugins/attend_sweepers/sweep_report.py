"""What a sweep's jobs did: one line per failed job, written to the sweep folder and printed; the
sweep then exits non-zero, so scripts and CI notice."""

import json
import logging
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus

log = logging.getLogger(__name__)
SUMMARY_FILE = "sweep_summary.json"


@dataclass
class JobOutcome:
    """One job of a sweep: its number, overrides, folder, status (completed, failed, pruned), value or error."""

    number: int
    overrides: list[str]
    folder: str | None
    status: str
    value: float | None = None
    error: str | None = None


def pinned_sweep_folder(config) -> tuple[Path, str]:
    """The sweep folder, resolved once, and the override that gives it to every job: a job composed in
    another process (parallel or SLURM launchers, a requeued job) would otherwise resolve ``${now:...}``
    again and land in a new folder."""
    folder = Path(str(config.hydra.sweep.dir)).resolve()
    quoted = str(folder).replace("\\", "\\\\").replace("'", "\\'")
    return folder, f"hydra.sweep.dir='{quoted}'"


def outcome_of(number: int, job: JobReturn, pruned: tuple[type[BaseException], ...] = ()) -> JobOutcome:
    """A Hydra JobReturn as a JobOutcome; exceptions of the ``pruned`` types count as pruned, not failed."""
    folder = job_folder(job)
    if job.status == JobStatus.COMPLETED:
        value = job._return_value  # the property raises for failed jobs; this one completed
        return JobOutcome(number, list(job.overrides or []), folder, "completed", to_float(value))
    error = job._return_value
    status = "pruned" if isinstance(error, pruned) else "failed"
    return JobOutcome(number, list(job.overrides or []), folder, status, error=f"{type(error).__name__}: {error}")


def job_folder(job: JobReturn) -> str | None:
    """The job's output folder (its run files and log), from the Hydra config it ran with."""
    hydra_cfg = job.hydra_cfg
    if hydra_cfg is None:
        return None
    runtime = hydra_cfg.hydra.runtime if "hydra" in hydra_cfg else hydra_cfg.runtime
    return str(runtime.output_dir)


def to_float(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def finish_sweep(sweep_dir: Path, outcomes: Iterable[JobOutcome], extra: dict | None = None) -> None:
    """Write ``sweep_summary.json``, log the outcome; with any failed job, name each and exit with status 1."""
    outcomes = sorted(outcomes, key=lambda o: o.number)
    failed = [o for o in outcomes if o.status == "failed"]
    counts = {status: sum(o.status == status for o in outcomes) for status in ("completed", "pruned", "failed")}
    summary = {"counts": counts, **(extra or {}), "jobs": [asdict(o) for o in outcomes]}
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    log.info("sweep finished: %s (%s)", ", ".join(f"{n} {s}" for s, n in counts.items() if n), sweep_dir / SUMMARY_FILE)
    if not failed:
        return
    lines = [f"{len(failed)} of {len(outcomes)} jobs failed:"]
    for o in failed:
        lines.append(f"  #{o.number} {' '.join(o.overrides)}")
        lines.append(f"      {o.error}")
        if o.folder:
            lines.append(f"      log: {Path(o.folder) / 'train.log'}")
    log.error("\n".join(lines))
    # a clean exit status without Hydra's traceback of the first failure (each job's log holds its own)
    sys.exit(1)
