"""Train one experiment (or a sweep with -m): python train.py task=mt attention=additive."""

import hydra
from omegaconf import DictConfig

from attend.train import train


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    return train(cfg)


if __name__ == "__main__":
    main()
