"""Decode inputs with a checkpoint: python predict.py ckpt_path=... 'inputs=[Guten Morgen.]' (or image files)"""

import hydra
from omegaconf import DictConfig

from attend.predict import predict


@hydra.main(version_base="1.3", config_path="conf", config_name="predict")
def main(cfg: DictConfig) -> None:
    predict(cfg)


if __name__ == "__main__":
    main()
