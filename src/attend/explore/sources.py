"""A source as the explorer page shows it: text tokens, the image, or the spectrogram, pictures as PNG data URIs so
the page fetches nothing."""

from __future__ import annotations

import base64
import io

import numpy as np
from matplotlib import colormaps
from PIL import Image

from attend.data.audio.features import Spectrogram


def page_source(source, grid: tuple[int, int] | None) -> dict:
    """The page's source from ``datamodule.readable_source``: tokens (a list), an image ((H, W, 3) uint8, weights
    over the (h, w) ``grid`` of its cells) or a ``Spectrogram`` (weights over encoder frames spanning it)."""
    if isinstance(source, Spectrogram):
        features = np.asarray(source.features, dtype=np.float32)  # (n_mels, frames)
        low, high = float(features.min()), float(features.max())
        scaled = (features - low) / (high - low) if high > low else np.zeros_like(features)
        pixels = (colormaps["magma"](scaled[::-1])[..., :3] * 255).astype(np.uint8)  # low bins at the bottom
        return {"kind": "spectrogram", "picture": png_uri(pixels), "frames": int(features.shape[1]),
                "seconds": float(source.seconds)}
    if isinstance(source, np.ndarray):
        if grid is None:
            raise ValueError("an image source needs the memory's grid (h, w) to place its weights")
        return {"kind": "image", "picture": png_uri(source), "width": int(source.shape[1]),
                "height": int(source.shape[0]), "grid": [int(grid[0]), int(grid[1])]}
    return {"kind": "tokens", "tokens": [str(token) for token in source]}


def png_uri(pixels: np.ndarray) -> str:
    """(H, W, 3) uint8 pixels as a data: URI."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
