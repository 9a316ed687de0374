"""The decoding explorer on a local web server: python explore.py ckpt_path=... [port=8765], then open
http://127.0.0.1:8765/, type a sentence (or pick an image or audio file) and step through its decoding."""

import hydra
from omegaconf import DictConfig

from attend.explore.server import serve
from attend.run.context import reported_as_messages


@hydra.main(version_base="1.3", config_path="conf", config_name="explore")
def main(cfg: DictConfig) -> None:
    with reported_as_messages():  # a missing checkpoint, a port in use: its message, exit status 2
        serve(cfg)


if __name__ == "__main__":
    main()
