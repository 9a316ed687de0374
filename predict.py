"""Decode inputs with a checkpoint: python predict.py ckpt_path=... 'inputs=[Guten Morgen.]' (or image files)"""

import hydra
from omegaconf import DictConfig

from attend.run.context import reported_as_messages
from attend.run.predict import predict


@hydra.main(version_base="1.3", config_path="conf", config_name="predict")
def main(cfg: DictConfig) -> None:
    with reported_as_messages():  # a config, input or checkpoint problem: its message, exit status 2
        predict(cfg)


if __name__ == "__main__":
    main()
