"""predict(cfg): decode sentences given on the command line or in a file with a checkpoint."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from attend.builder import ConfigError, check_config
from attend.checkpoint import load_checkpoint, restore
from attend.evaluate import search_overrides


def read_inputs(cfg: DictConfig) -> list[str]:
    """Sources from ``inputs`` (a list) or ``input_file`` (one a line, blank lines skipped)."""
    inputs = list(cfg.get("inputs") or [])
    if cfg.get("input_file"):
        path = Path(cfg.input_file)
        if not path.is_file():
            raise ConfigError(f"input_file {str(path)!r} does not exist")
        inputs += [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not inputs:
        raise ConfigError(
            "nothing to translate: pass inputs='[Guten Morgen.]' or input_file=path/to/file.txt"
        )
    return inputs


def predict(cfg: DictConfig) -> list[str]:
    check_config(cfg)
    sources = read_inputs(cfg)
    _, datamodule, model = restore(load_checkpoint(cfg.ckpt_path), search_overrides(cfg))
    outputs: list[str] = []
    for start in range(0, len(sources), cfg.batch_size):
        batch = datamodule.batch_from_sources(sources[start : start + cfg.batch_size])
        hypotheses, _ = model.generate(batch, model.test_search)
        outputs += hypotheses
    for source, output in zip(sources, outputs, strict=True):
        print(f"{source}\t{output}")
    if cfg.get("output_file"):
        Path(cfg.output_file).write_text("".join(o + "\n" for o in outputs), encoding="utf-8")
    return outputs
