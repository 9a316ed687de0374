"""Attention plots: pure functions from weights to a matplotlib Figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def text_heatmap(
    weights: np.ndarray, source: list[str], output: list[str], title: str = "", max_cell: float = 0.35
) -> Figure:
    """Source tokens (columns) x output tokens (rows) heatmap of weights (T, S), tokens on the axes."""
    weights = np.asarray(weights, dtype=np.float32)[: len(output), : len(source)]
    width = min(24.0, 1.5 + max_cell * len(source))
    height = min(24.0, 1.2 + max_cell * len(output))
    fig, ax = plt.subplots(figsize=(max(width, 3.0), max(height, 2.5)), dpi=100)
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(source)), labels=source, rotation=90, fontsize=8)
    ax.set_yticks(range(len(output)), labels=output, fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    fig.tight_layout()
    return fig


def close_figure(fig: Figure) -> None:
    """Free a figure's memory (pyplot keeps every open figure)."""
    plt.close(fig)
