"""Time and profile training steps of the configured model on real batches (no Lightning loop).

    .venv/bin/python scripts/profile_step.py                       # the default MT model
    .venv/bin/python scripts/profile_step.py decoder.input_feeding=true data.loader.batch_size=32

Prints non-padding target tokens per second, milliseconds per step (forward, loss, backward,
optimizer step; median and mean over the timed steps) and the operators that take the most time.
Any train.py override applies. The step-time figures in docs/results.md were measured with it.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time

import lightning as L
import torch
from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.profiler import profile

from attend.builder import build_datamodule, build_model
from attend.config.checks import check_config
from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.run.context import apply_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for train.py")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=30, help="timed steps")
    parser.add_argument("--top", type=int, default=12, help="operators to list (0: no profile)")
    args = parser.parse_args()

    cfg = load_config(args.overrides)
    L.seed_everything(cfg.seed, verbose=False)
    apply_threads(cfg)  # as train.py runs: task=asr trains on one thread
    datamodule = build_datamodule(cfg)
    datamodule.prepare_data()
    datamodule.setup("fit")
    model = build_model(cfg, datamodule).train()
    optimizer = instantiate(cfg.optim.optimizer)(model.parameters())
    # a split with fewer batches than asked for is cycled: the timing needs steps, not new data
    batches = list(itertools.islice(itertools.cycle(datamodule.train_dataloader()), args.warmup + args.steps))

    def step(batch: dict) -> None:
        loss = model.teacher_forced_loss(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for batch in batches[: args.warmup]:
        step(batch)
    times, tokens = [], 0
    for batch in batches[args.warmup :]:
        start = time.perf_counter()
        step(batch)
        times.append(time.perf_counter() - start)
        tokens += int(batch["num_target_tokens"])
    print(f"threads {torch.get_num_threads()}  overrides {' '.join(args.overrides) or '(none)'}")
    # both: bucketed batches differ in length, and an epoch takes the mean times the steps, not the median
    median, mean = 1000 * statistics.median(times), 1000 * statistics.mean(times)
    print(f"{tokens / sum(times):.0f} target tokens/s  {median:.1f} ms/step (median), {mean:.1f} (mean)")
    if args.top:
        with profile() as profiler:
            for batch in batches[args.warmup :][:10]:
                step(batch)
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


def load_config(overrides: list[str]) -> DictConfig:
    """train.py's config with these overrides; a bad override or a missing value exits with its message."""
    try:
        cfg = compose_config(overrides, output_dir="/tmp/attend-profile")
        check_config(cfg)
    except (HydraException, ConfigError) as error:
        sys.exit(f"profile_step.py: {error}")
    return cfg


if __name__ == "__main__":
    main()
