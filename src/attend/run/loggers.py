"""Loggers that show attention plots: Lightning's W&B and TensorBoard loggers, each logging them its own way.

The plots callback asks every logger of the run for ``log_attention`` (``attend.callbacks.AttentionLogger``, the
protocol these implement), so a logger that can show plots says how, and one that cannot (CSV) is passed over;
no ladder over logger classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning.pytorch import loggers

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class WandbLogger(loggers.WandbLogger):
    """Lightning's W&B logger; the attention plots become one image panel per example and a samples table."""

    def log_attention(self, figures: list[Figure], paths: list[str], rows: list[list[str]], step: int) -> None:
        for i, path in enumerate(paths):  # one panel per example: sizes differ, and a slider per panel
            self.log_image(key=f"val/attention/example_{i}", images=[path], step=step)
        self.log_table(key="val/samples", columns=["source", "reference", "output"], data=rows, step=step)


class TensorBoardLogger(loggers.TensorBoardLogger):
    """Lightning's TensorBoard logger; the attention plots become figures and the samples one text."""

    def log_attention(self, figures: list[Figure], paths: list[str], rows: list[list[str]], step: int) -> None:
        for i, fig in enumerate(figures):
            self.experiment.add_figure(f"val/attention/{i}", fig, global_step=step, close=False)
        self.experiment.add_text("val/samples", "\n\n".join(" | ".join(r) for r in rows), global_step=step)
