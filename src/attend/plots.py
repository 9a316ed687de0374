"""Attention plots: pure functions from weights to a matplotlib Figure."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


@dataclass(frozen=True)
class Spectrogram:
    """What speech plots show of a source: log-mel features (n_mels, frames) and the hop in seconds."""

    features: np.ndarray
    hop_seconds: float

    @property
    def seconds(self) -> float:
        return self.features.shape[1] * self.hop_seconds


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


def image_attention(
    weights: np.ndarray, image: np.ndarray, output: list[str], title: str = "", columns: int = 5, panel: float = 1.8
) -> Figure:
    """The image, then per output word its attention map (T, h, w) upsampled onto the image, the word above.

    As in Xu et al. 2015, fig. 2-3: each map is scaled to its own maximum, bright where the word
    attends and dimmed elsewhere; the panel title gives the word and its largest cell weight.
    """
    image = np.asarray(image, dtype=np.float32) / (255.0 if np.asarray(image).dtype == np.uint8 else 1.0)
    height, width = image.shape[:2]
    maps = torch.as_tensor(np.asarray(weights, dtype=np.float32)[: len(output)]).unsqueeze(1)  # (T, 1, h, w)
    upsampled = F.interpolate(maps, size=(height, width), mode="bilinear", align_corners=False).squeeze(1)
    panels = len(output) + 1
    rows = (panels + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(columns * panel, rows * (panel + 0.3)), dpi=100, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    axes.flat[0].imshow(image)
    axes.flat[0].set_title(title or "image", fontsize=8)
    for t, word in enumerate(output):
        heat = upsampled[t].numpy()
        heat = heat / max(float(heat.max()), 1e-8)  # (H, W) in [0, 1]
        ax = axes.flat[t + 1]
        ax.imshow(image * (0.25 + 0.75 * heat[..., None]))
        ax.imshow(heat, cmap="magma", alpha=0.35, vmin=0.0, vmax=1.0)
        ax.set_title(f"{word}  ({float(maps[t].max()):.2f})", fontsize=9)
    fig.tight_layout()
    return fig


def spectrogram_alignment(
    weights: np.ndarray, source: Spectrogram, output: list[str], title: str = "", row_height: float = 0.16
) -> Figure:
    """The log-mel spectrogram above the alignment of output tokens (rows) x encoder frames, on one time axis.

    weights (T, S) cover the S valid encoder frames, which span the whole utterance (each frame
    stands for the subsampling factor's worth of feature frames), so both panels share seconds on x.
    """
    weights = np.asarray(weights, dtype=np.float32)[: len(output)]
    seconds = source.seconds
    width = float(np.clip(2.0 + 2.5 * seconds, 6.0, 24.0))
    heights = [1.6, max(1.2, row_height * len(output))]
    fig, (top, bottom) = plt.subplots(
        2, 1, sharex=True, figsize=(width, sum(heights) + 1.0), dpi=100, gridspec_kw={"height_ratios": heights},
        layout="constrained",
    )
    mel_bins = source.features.shape[0]
    top.imshow(source.features, origin="lower", aspect="auto", cmap="magma", extent=(0.0, seconds, 0, mel_bins))
    top.set_ylabel("mel bin")
    if title:
        top.set_title(title, fontsize=9)
    image = bottom.imshow(
        weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest",
        extent=(0.0, seconds, len(output) - 0.5, -0.5),
    )
    bottom.set_yticks(range(len(output)), labels=output, fontsize=7)
    bottom.set_xlabel("time (s)")
    bottom.set_ylabel("output")
    fig.colorbar(image, ax=[top, bottom], fraction=0.03, pad=0.01)
    return fig


def close_figure(fig: Figure) -> None:
    """Free a figure's memory (pyplot keeps every open figure)."""
    plt.close(fig)
