"""predict(cfg): decode inputs (sentences, image files, audio files) from the command line or a file."""

from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from attend.callbacks import draw_attention
from attend.checkpoints.saved_run import load_run, restore
from attend.config.checks import check_config
from attend.config.errors import ConfigError
from attend.data.audio import AudioReadError
from attend.data.images import ImageReadError
from attend.explore import explore_batch, write_pages
from attend.plots import close_figure


def read_inputs(cfg: DictConfig) -> list[str]:
    """Sentences, image or audio paths from ``inputs`` (a list) or ``input_file`` (one a line, blank lines skipped)."""
    inputs = list(cfg.get("inputs") or [])
    if cfg.get("input_file"):
        path = Path(cfg.input_file)
        if not path.is_file():
            raise ConfigError(f"input_file {str(path)!r} does not exist")
        inputs += [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not inputs:
        raise ConfigError(
            "nothing to decode: pass inputs='[Guten Morgen.]' (an image path for captioning, an audio file for speech) "
            "or input_file=path/to/file.txt"
        )
    return inputs


def read_references(cfg: DictConfig, count: int) -> list[str | None]:
    """The references to teacher-force each input on in the explorer (``references``: one per input; empty or
    null for none), None for an input without one."""
    references = [None if reference in (None, "") else str(reference) for reference in cfg.get("references") or []]
    if references and len(references) != count:
        raise ConfigError(f"references has {len(references)} entries for {count} inputs: give one per input "
                          "(an empty string for an input without one), or none")
    if references and not cfg.get("explore"):
        raise ConfigError("references are teacher-forced in the explorer pages only: add explore=true")
    return references or [None] * count


def predict(cfg: DictConfig) -> list[str]:
    check_config(cfg)
    if isinstance(cfg.get("batch_size"), bool) or not isinstance(cfg.get("batch_size"), int) or cfg.batch_size < 1:
        raise ConfigError(f"batch_size={cfg.get('batch_size')!r}: give a whole number of inputs a batch, 1 or more")
    sources = read_inputs(cfg)
    references = read_references(cfg, len(sources))
    run = load_run(cfg.ckpt_path, cfg)
    datamodule, model = restore(run)
    plot = instantiate(run.config.callbacks.attention_plots.plot) if cfg.get("plots") else None
    outputs: list[str] = []
    for start in range(0, len(sources), cfg.batch_size):
        try:
            batch = datamodule.batch_from_sources(sources[start : start + cfg.batch_size])
        except (ImageReadError, AudioReadError) as error:
            raise ConfigError(f"cannot read an input: {error}") from error
        if cfg.get("explore"):  # the same decode call, with the search's recorder: one page per input
            chunk = references[start : start + cfg.batch_size]
            titles = [f"input {start + i}" for i in range(len(chunk))]
            hypotheses, pages = explore_batch(model, datamodule, batch, model.test_search, chunk, titles)
            write_pages(pages, Path(cfg.paths.output_dir) / "explore", "input", first=start)
            outputs += hypotheses
        else:
            outputs += model.decode(batch, model.test_search).hypotheses
        if plot is not None:  # attention figures, with the validation search as during training
            folder = Path(cfg.paths.output_dir) / "attention"
            figures, _, _ = draw_attention(model, datamodule, batch, plot, folder, "input", stem="input", first=start)
            for fig in figures:
                close_figure(fig)
    for source, output in zip(sources, outputs, strict=True):
        print(f"{source}\t{output}")
    if cfg.get("output_file"):
        Path(cfg.output_file).write_text("".join(o + "\n" for o in outputs), encoding="utf-8")
    if cfg.get("explore"):
        print(f"explorer pages: {Path(cfg.paths.output_dir) / 'explore'} (open input_N.html in a browser)")
    if plot is not None:
        print(f"attention plots: {Path(cfg.paths.output_dir) / 'attention'}")
    return outputs
