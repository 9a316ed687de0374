"""Attention grounding on scenes with known object boxes (data=shapes)."""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

from attend.metrics.base import Decoded


def box_cells(box: tuple[float, float, float, float], grid: tuple[int, int]) -> Tensor:
    """(H*W,) bool, row-major: the grid cells that overlap ``box`` (x0, y0, x1, y1 as image fractions)."""
    height, width = grid
    x0, y0, x1, y1 = box
    cols = torch.arange(width)
    rows = torch.arange(height)
    in_x = (cols / width < x1) & ((cols + 1) / width > x0)  # (W,)
    in_y = (rows / height < y1) & ((rows + 1) / height > y0)  # (H,)
    return (in_y.unsqueeze(1) & in_x.unsqueeze(0)).flatten()


class Grounding(Metric):
    """Does each output word that names an object attend to that object? In percent.

    The k-th output word that names a shape kind is matched with the k-th object of the scene (the
    caption's order) and counts when it names that object's kind. ``kind="mass"``: mean attention
    mass on the cells that overlap the object's box; ``kind="pointing"``: share of such words whose
    highest-weight cell overlaps the box (the pointing game of Zhang et al. 2016, on grid cells).
    ``batch["objects"]`` holds each scene's objects as ``{"kind": word, "box": (x0, y0, x1, y1)}``;
    batches without objects or memories without a grid are not counted.
    """

    higher_is_better = True
    batch_fields = ("objects",)  # a batch field the data adds (images); eval.py on data without it leaves it out

    def __init__(self, kind: str = "pointing", **kwargs) -> None:
        super().__init__(**kwargs)
        if kind not in ("mass", "pointing"):
            raise ValueError(f"Grounding kind must be 'mass' or 'pointing', got {kind!r}")
        self.kind = kind
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, decoded: Decoded) -> None:
        batch, result = decoded.batch, decoded.result
        if result.grid is None or "objects" not in batch:
            return
        weights = result.weights.detach().float().cpu()  # (B, T, S)
        for i, objects in enumerate(batch["objects"]):
            words = decoded.output_tokens(i)
            kinds = {obj["kind"] for obj in objects}
            named = [t for t, word in enumerate(words) if word in kinds]
            for t, obj in zip(named, objects, strict=False):
                if words[t] != obj["kind"]:
                    continue
                cells = box_cells(obj["box"], result.grid)  # (S,)
                step = weights[i, t]  # (S,)
                score = step[cells].sum() if self.kind == "mass" else cells[step.argmax()].double()
                self.total += float(score)
                self.count += 1

    def compute(self) -> Tensor:
        return 100.0 * self.total / self.count.clamp(min=1)
