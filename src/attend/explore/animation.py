"""An animated GIF of a page's search steps, for a dashboard that shows images but not HTML (TensorBoard)."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image


def steps_animation(data: dict, cell: int = 12, frame_ms: int = 600) -> bytes:
    """GIF bytes, one frame per output step of the search: an image source with the step's weights as a heat
    overlay; a sequence source (tokens, encoder frames) as the steps x positions weights revealed up to the step,
    the step's row in orange."""
    steps = data["modes"]["search"]
    weights = [np.asarray(step["weights"], dtype=np.float32) for step in steps]
    source = data["source"]
    frames = [image_frame(source, w) if source["kind"] == "image" else alignment_frame(weights, t, cell)
              for t, w in enumerate(weights)]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=frame_ms, loop=0)
    return buffer.getvalue()


def image_frame(source: dict, weights: np.ndarray, scale: int = 2) -> Image.Image:
    """The image, darkened where the step attends little, at its own resolution times ``scale``."""
    picture = Image.open(io.BytesIO(base64.b64decode(source["picture"].split(",", 1)[1]))).convert("RGB")
    h, w = source["grid"]
    heat = weights.reshape(h, w) / max(float(weights.max()), 1e-12)
    heat_image = Image.fromarray((heat * 255).astype(np.uint8)).resize(picture.size, Image.BILINEAR)
    shade = np.asarray(heat_image, dtype=np.float32)[..., None] / 255.0
    pixels = np.asarray(picture, dtype=np.float32) * (0.25 + 0.75 * shade)
    frame = Image.fromarray(pixels.astype(np.uint8))
    return frame.resize((frame.width * scale, frame.height * scale), Image.NEAREST)


def alignment_frame(weights: list[np.ndarray], t: int, cell: int) -> Image.Image:
    """Rows 0..t of the (steps, positions) weights in grey (each row scaled to its maximum), later rows blank."""
    rows, size = len(weights), max(len(w) for w in weights)
    cell_w = max(2, min(cell, 960 // max(size, 1)))
    pixels = np.full((rows, size, 3), 255, dtype=np.uint8)
    for i, w in enumerate(weights[: t + 1]):
        level = (255 * (1 - w / max(float(w.max()), 1e-12))).astype(np.uint8)  # dark where it attends
        pixels[i, : len(w)] = level[:, None] if i < t else np.stack([np.full_like(level, 255), level // 2 + 64,
                                                                    level // 4], axis=-1)
    return Image.fromarray(pixels).resize((size * cell_w, rows * cell), Image.NEAREST)
