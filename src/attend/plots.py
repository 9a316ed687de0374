"""Attention plots: pure functions from weights to a matplotlib Figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attend.data.audio.features import Spectrogram  # noqa: E402


def text_heatmap(
    weights: np.ndarray, source: list[str], output: list[str], title: str = "", max_cell: float = 0.35,
    columns: int = 4,
) -> Figure:
    """Source tokens (columns) x output tokens (rows) heatmap of weights (T, S), tokens on the axes.

    Weights (H, T, S) of several heads give one panel per head, ``columns`` to a row.
    """
    heads = _heads(weights)  # (H, T, S)
    panels_across = min(columns, len(heads))
    panel_rows = (len(heads) + panels_across - 1) // panels_across
    width = min(24.0, 1.5 + max_cell * len(source))
    height = min(24.0, 1.2 + max_cell * len(output))
    fig, axes = plt.subplots(
        panel_rows, panels_across, figsize=(max(width, 3.0) * panels_across, max(height, 2.5) * panel_rows),
        dpi=100, squeeze=False, layout="constrained",
    )
    for ax in axes.flat[len(heads):]:
        ax.axis("off")
    for h, head in enumerate(heads):
        ax = axes.flat[h]
        image = ax.imshow(
            head[: len(output), : len(source)], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto",
            interpolation="nearest",
        )
        ax.set_xticks(range(len(source)), labels=source, rotation=90, fontsize=8)
        ax.set_yticks(range(len(output)), labels=output, fontsize=8)
        ax.set_xlabel("source")
        ax.set_ylabel("output")
        label = title if len(heads) == 1 else f"{title} head {h + 1}".strip()
        if label:
            ax.set_title(label, fontsize=9)
    fig.colorbar(image, ax=list(axes.flat), fraction=0.04, pad=0.02)
    return fig


def _heads(weights: np.ndarray, single_dims: int = 2) -> np.ndarray:
    """Weights with a leading head axis: (H, ...) as given, or (1, ...) when they have ``single_dims`` axes."""
    weights = np.asarray(weights, dtype=np.float32)
    return weights[None] if weights.ndim == single_dims else weights


def image_attention(
    weights: np.ndarray, image: np.ndarray, output: list[str], title: str = "", columns: int = 5, panel: float = 1.8
) -> Figure:
    """The image, then per output word its attention map (T, h, w) upsampled onto the image, the word above.

    As in Xu et al. 2015, fig. 2-3: each map is scaled to its own maximum, bright where the word
    attends and dimmed elsewhere; the panel title gives the word and its largest cell weight.
    Weights (H, T, h, w) of several heads give one row per head: the image, then the words.
    """
    image = np.asarray(image, dtype=np.float32) / (255.0 if np.asarray(image).dtype == np.uint8 else 1.0)
    heads = _heads(weights, single_dims=3)[:, : len(output)]  # (H, T, h, w)
    if len(heads) > 1:
        columns = len(output) + 1  # one row per head
    panels_per_head = (len(output) + 1 + columns - 1) // columns * columns
    rows = len(heads) * panels_per_head // columns
    fig, axes = plt.subplots(rows, columns, figsize=(columns * panel, rows * (panel + 0.3)), dpi=100, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for h, maps in enumerate(heads):
        first = h * panels_per_head
        label = title or "image"
        axes.flat[first].imshow(image)
        axes.flat[first].set_title(label if len(heads) == 1 else f"{label} head {h + 1}", fontsize=8)
        _word_maps(axes.flat[first + 1 : first + 1 + len(output)], image, maps, output)
    fig.tight_layout()
    return fig


def _word_maps(axes, image: np.ndarray, maps: np.ndarray, output: list[str]) -> None:
    """Each word's map (T, h, w) upsampled onto the image (H, W, 3), one axis per word."""
    height, width = image.shape[:2]
    maps = torch.as_tensor(maps).unsqueeze(1)  # (T, 1, h, w)
    upsampled = F.interpolate(maps, size=(height, width), mode="bilinear", align_corners=False).squeeze(1)
    for t, (ax, word) in enumerate(zip(axes, output, strict=True)):
        heat = upsampled[t].numpy()
        heat = heat / max(float(heat.max()), 1e-8)  # (H, W) in [0, 1]
        ax.imshow(image * (0.25 + 0.75 * heat[..., None]))
        ax.imshow(heat, cmap="magma", alpha=0.35, vmin=0.0, vmax=1.0)
        ax.set_title(f"{word}  ({float(maps[t].max()):.2f})", fontsize=9)


def spectrogram_alignment(
    weights: np.ndarray, source: Spectrogram, output: list[str], title: str = "", row_height: float = 0.16,
    max_panel_height: float = 8.0,
) -> Figure:
    """The log-mel spectrogram above the alignment of output tokens (rows) x encoder frames, on one time axis.

    weights (T, S) cover the S valid encoder frames, which span the whole utterance (each frame
    stands for the subsampling factor's worth of feature frames), so both panels share seconds on x.
    Weights (H, T, S) of several heads give one alignment panel per head under the spectrogram.
    A panel is ``row_height`` inches a token up to ``max_panel_height``; past that the rows get thinner and only
    every k-th token is labelled (a 200-character utterance would otherwise be a 3,000-pixel-tall PNG, slow to
    draw every validation epoch and unreadable on a dashboard).
    """
    heads = _heads(weights)[:, : len(output)]  # (H, T, S)
    seconds = source.seconds
    width = float(np.clip(2.0 + 2.5 * seconds, 6.0, 24.0))
    panel = float(np.clip(row_height * len(output), 1.2, max_panel_height))
    label_every = max(1, int(np.ceil(len(output) * row_height / panel)))
    heights = [1.6] + [panel] * len(heads)
    fig, axes = plt.subplots(
        1 + len(heads), 1, sharex=True, figsize=(width, sum(heights) + 1.0), dpi=100,
        gridspec_kw={"height_ratios": heights}, layout="constrained",
    )
    top = axes[0]
    mel_bins = source.features.shape[0]
    top.imshow(source.features, origin="lower", aspect="auto", cmap="magma", extent=(0.0, seconds, 0, mel_bins))
    top.set_ylabel("mel bin")
    if title:
        top.set_title(title, fontsize=9)
    for h, (ax, head) in enumerate(zip(axes[1:], heads, strict=True)):
        image = ax.imshow(
            head, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest",
            extent=(0.0, seconds, len(output) - 0.5, -0.5),
        )
        ax.set_yticks(range(0, len(output), label_every), labels=output[::label_every], fontsize=7)
        ax.set_ylabel("output" if len(heads) == 1 else f"head {h + 1}")
    axes[-1].set_xlabel("time (s)")
    fig.colorbar(image, ax=list(axes), fraction=0.03, pad=0.01)
    return fig


def close_figure(fig: Figure) -> None:
    """Free a figure's memory (pyplot keeps every open figure)."""
    plt.close(fig)
