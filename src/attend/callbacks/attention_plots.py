"""The attention plots and samples of some examples every validation epoch, and the loggers that show them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import lightning as L
from lightning.pytorch.utilities import rank_zero_only

from attend.explore import decode_and_explore, write_pages
from attend.plots import close_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from attend.metrics.base import Decoded

log = logging.getLogger(__name__)


@runtime_checkable
class ExplorerLogger(Protocol):
    """A logger that shows the decoding explorer's pages (``attend.explore``), one per plotted example."""

    def log_explorer(self, pages: list[dict], paths: list[str], step: int) -> None:
        """``pages``: each example's page data, saved as the HTML file at ``paths``; ``step`` the global step."""


@runtime_checkable
class AttentionLogger(Protocol):
    """A logger that shows the attention figures of some examples and a table of their texts."""

    def log_attention(self, figures: list[Figure], paths: list[str], rows: list[list[str]], step: int) -> None:
        """``figures`` and the PNG ``paths`` they were saved to, one per example; ``rows`` of source,
        reference and output, one per example; ``step`` the global step."""


class AttentionPlots(L.Callback):
    """Decode a fixed set of validation examples each validation epoch; plot and log their attention.

    PNGs land in ``<output_dir>/attention/epoch_XXX/``; every logger that can show them (``log_attention``,
    ``attend.loggers.tensorboard_run``: W&B, TensorBoard) receives them with each example's source, reference and
    output. With multi-head attention ``per_head`` draws one panel per head; otherwise the heads' mean. With
    ``explorer`` each example also gets its decoding explorer page, ``example_N.html`` beside its PNG (the search
    step by step and teacher forcing on its reference), handed to the loggers that show them (``log_explorer``).
    """

    def __init__(
        self, plot: Callable, output_dir: str, num_examples: int = 4, every_n_epochs: int = 1, per_head: bool = True,
        explorer: bool = True,
    ) -> None:
        self.plot = plot
        self.output_dir = Path(output_dir)
        self.num_examples = num_examples
        self.every_n_epochs = every_n_epochs
        self.per_head = per_head
        self.explorer = explorer
        self.failures = 0

    @rank_zero_only
    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.current_epoch % self.every_n_epochs:
            return
        try:
            self.draw(trainer, pl_module, f"epoch_{trainer.current_epoch:03d}")
        except Exception:  # a plot is never worth the run: say why once, count the rest
            self.failures += 1
            if self.failures == 1:
                log.exception("drawing or logging the attention plots failed; training goes on without them")
            else:
                log.debug("the attention plots failed again (%d times)", self.failures)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.failures > 1:
            log.warning("the attention plots failed at %d validation epochs (the first error is logged above)",
                        self.failures)

    def draw(self, trainer: L.Trainer, pl_module: L.LightningModule, name: str, split: str = "val") -> Path | None:
        """Plot the first examples of ``split`` into ``<output_dir>/attention/<name>``; returns that folder (None,
        and nothing drawn, with ``num_examples`` 0)."""
        if self.num_examples < 1:
            return None
        datamodule = trainer.datamodule
        batch = datamodule.example_batch(self.num_examples, split=split)
        folder = self.output_dir / "attention" / name
        batch = pl_module.transfer_batch_to_device(batch, pl_module.device, 0)
        # with the explorer, its decode (the same search, recording its steps) also draws the PNGs: one decode
        decoded, pages = self.explore(pl_module, datamodule, batch, name) if self.explorer else (None, [])
        figures, paths, rows = draw_attention(
            pl_module, datamodule, batch, self.plot, folder, name, per_head=self.per_head, decoded=decoded
        )
        (folder / "samples.tsv").write_text(
            "source\treference\toutput\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8"
        )
        for logger in trainer.loggers:
            if isinstance(logger, AttentionLogger):  # a declared ability, not a logger class
                logger.log_attention(figures, paths, rows, trainer.global_step)
        for fig in figures:
            close_figure(fig)
        if self.explorer:
            page_paths = [str(path) for path in write_pages(pages, folder, "example")]
            for logger in trainer.loggers:
                if isinstance(logger, ExplorerLogger):
                    logger.log_explorer(pages, page_paths, trainer.global_step)
        return folder

    @staticmethod
    def explore(pl_module: L.LightningModule, datamodule, batch: dict, name: str) -> tuple[Decoded, list[dict]]:
        """The examples decoded with the validation search, as the plots, and their explorer pages."""
        references = [first_reference(reference) for reference in batch["references"]]
        was_training = pl_module.training
        pl_module.eval()
        try:
            titles = [f"{name} example {i}" for i in range(len(references))]
            return decode_and_explore(pl_module, datamodule, batch, pl_module.val_search, references, titles)
        finally:
            pl_module.train(was_training)


def draw_attention(
    pl_module: L.LightningModule, datamodule, batch: dict, plot: Callable, folder: Path, name: str,
    stem: str = "example", first: int = 0, per_head: bool = False, decoded: Decoded | None = None,
) -> tuple[list, list[str], list[list[str]]]:
    """Decode ``batch`` with the validation search, save one attention figure per example as
    ``folder/<stem>_<first + N>.png``; returns (figures, paths, rows of source, reference, output).

    Weights over an image grid reach ``plot`` as (T, h, w), over a sequence as (T, S); with
    ``per_head`` and a multi-head search result, with a leading head axis (H, T, ...). The source
    is what ``datamodule.readable_source`` gives (tokens, an image, a spectrogram). ``decoded``: the batch already
    decoded with that search (the explorer's decode), else it is decoded here.
    """
    if decoded is None:
        batch = pl_module.transfer_batch_to_device(batch, pl_module.device, 0)
        was_training = pl_module.training
        pl_module.eval()
        decoded = pl_module.decode(batch, pl_module.val_search)
        pl_module.train(was_training)
    folder.mkdir(parents=True, exist_ok=True)
    result = decoded.result
    figures, paths, rows = [], [], []
    for i, hypothesis in enumerate(decoded.hypotheses):
        length = int(result.lengths[i])
        output = decoded.output_tokens(i)
        if per_head and result.head_weights is not None:
            weights = result.head_weights[i, :, :length].float().cpu().numpy()  # (H, T, S)
        else:
            weights = result.weights[i, :length].float().cpu().numpy()  # (T, S)
        if result.grid is not None:
            weights = weights.reshape(*weights.shape[:-1], *result.grid)  # ([H,] T, h, w)
        elif result.source_lengths is not None:
            weights = weights[..., : int(result.source_lengths[i])]  # ([H,] T, S_i): no padding columns
        fig = plot(weights, datamodule.readable_source(batch, i), output, title=f"{name} example {i}")
        path = folder / f"{stem}_{first + i}.png"
        fig.savefig(path, format="png")
        figures.append(fig)
        paths.append(str(path))
        rows.append([str(batch["sources"][i]), reference_text(batch["references"][i]), hypothesis])
    return figures, paths, rows


def first_reference(reference: str | list[str]) -> str | None:
    """The reference to teacher-force on: the one, or the first of several (captions); None when there is none."""
    if isinstance(reference, str):
        return reference or None
    return reference[0] if reference else None


def reference_text(reference: str | list[str]) -> str:
    """One reference, or several joined by " | " (captions), for tables and TSV files."""
    return reference if isinstance(reference, str) else " | ".join(reference)
