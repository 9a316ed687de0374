"""Train one experiment (or a sweep with -m): python train.py task=mt attention=additive."""

import hydra
from omegaconf import DictConfig

from attend.run.context import reported_as_messages
from attend.run.train import train


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    with reported_as_messages():  # a config, data or divergence problem: its message, exit status 2
        return train(cfg)


if __name__ == "__main__":
    main()
