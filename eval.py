"""Evaluate a checkpoint on its test split: python eval.py ckpt_path=outputs/.../checkpoints/best.ckpt"""

import hydra
from omegaconf import DictConfig

from attend.run.context import reported_as_messages
from attend.run.evaluate import evaluate


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    with reported_as_messages():  # a config, data or checkpoint problem: its message, exit status 2
        evaluate(cfg)


if __name__ == "__main__":
    main()
