"""Synthetic scenes of coloured shapes on a 3x3 layout, captioned from their layout ("a small red circle above ...")."""

from __future__ import annotations

import random

from PIL import Image, ImageDraw

from attend.data.images.record import ImageCaption, SceneObject
from attend.data.splitting import SPLITS

KINDS = ("circle", "square", "triangle")
COLOURS = {"red": (220, 30, 30), "green": (30, 160, 50), "blue": (30, 70, 220), "yellow": (235, 195, 0)}
SIZES = {"small": 0.45, "large": 0.8}  # side of the shape as a fraction of its slot's side
GRID = 3  # slots per row and per column
MAX_JITTER = 0.25  # at most this fraction of a slot's side off the slot centre (less if the shape would leave it)
MARGIN = 0.05  # of a slot's side, kept free at its border so neighbouring shapes never touch
SUPERSAMPLE = 4


class ShapeScenes:
    """Deterministic scenes of 1..max_objects shapes; scene i of a split does not depend on the n_* sizes."""

    def __init__(self, n_train: int = 4000, n_val: int = 300, n_test: int = 300, image_size: int = 64,
                 max_objects: int = 3, seed: int = 1234) -> None:
        if not 1 <= max_objects <= GRID * GRID:
            raise ValueError(f"max_objects={max_objects} must be between 1 and {GRID * GRID} (one shape per slot)")
        if image_size < GRID * 4:
            raise ValueError(f"image_size={image_size} is too small to draw {GRID}x{GRID} slots of shapes")
        if min(n_train, n_val, n_test) < 0:
            raise ValueError(f"split sizes must be >= 0, got n_train={n_train} n_val={n_val} n_test={n_test}")
        self.sizes = {"train": n_train, "val": n_val, "test": n_test}
        self.image_size = image_size
        self.max_objects = max_objects
        self.seed = seed

    def settings(self) -> dict:
        """The constructor arguments."""
        return {"n_train": self.sizes["train"], "n_val": self.sizes["val"], "n_test": self.sizes["test"],
                "image_size": self.image_size, "max_objects": self.max_objects, "seed": self.seed}

    def splits(self) -> dict[str, list[ImageCaption]]:
        """{"train", "val", "test"} -> scene records (layout and caption only, nothing is rendered)."""
        return {split: [self.scene(split, i) for i in range(self.sizes[split])] for split in SPLITS}

    def scene(self, split: str, i: int) -> ImageCaption:
        """Scene ``i`` of ``split``: a function of (seed, split, i, max_objects) only."""
        rng = random.Random(f"shapes-{self.seed}-{split}-{i}")
        n = rng.randint(1, self.max_objects)
        slots = sorted(rng.sample(range(GRID * GRID), n))  # row-major order = sorted by (row, column)
        words: list[str] = []
        objects = []
        previous_row = -1
        for slot in slots:
            row, col = divmod(slot, GRID)
            kind, colour, size = rng.choice(KINDS), rng.choice(list(COLOURS)), rng.choice(list(SIZES))
            if words:
                words += ["to", "the", "left", "of"] if row == previous_row else ["above"]
            words += ["a", size, colour, kind]
            objects.append(SceneObject(kind, place(rng, row, col, SIZES[size]), len(words) - 1))
            previous_row = row
        return ImageCaption(key=f"shapes-{split}-{i}", captions=(" ".join(words),), objects=tuple(objects))

    def load_image(self, record: ImageCaption) -> Image.Image:
        """Render the scene: white background, image_size x image_size RGB, drawn at 4x and downsampled."""
        big = self.image_size * SUPERSAMPLE
        img = Image.new("RGB", (big, big), "white")
        draw = ImageDraw.Draw(img)
        words = record.captions[0].split()
        for obj in record.objects:
            colour = COLOURS[words[obj.word_index - 1]]
            # pixels [x0, x1) cover the box; PIL's shapes include their right/bottom coordinate, hence the -1
            x0, y0, x1, y1 = (round(v * big) for v in obj.box)
            x1, y1 = x1 - 1, y1 - 1
            if obj.kind == "circle":
                draw.ellipse((x0, y0, x1, y1), fill=colour)
            elif obj.kind == "square":
                draw.rectangle((x0, y0, x1, y1), fill=colour)
            elif obj.kind == "triangle":
                draw.polygon([(x0, y1), ((x0 + x1) / 2, y0), (x1, y1)], fill=colour)
            else:
                raise ValueError(f"unknown shape kind {obj.kind!r} in record {record.key}")
        return img.resize((self.image_size, self.image_size), Image.Resampling.LANCZOS)


def place(rng: random.Random, row: int, col: int, side: float) -> tuple[float, float, float, float]:
    """Box (fractions of the image) of a shape of relative ``side`` jittered inside slot (row, col)."""
    slot = 1.0 / GRID
    half = side * slot / 2
    room = min(MAX_JITTER, 0.5 - MARGIN - side / 2) * slot  # keeps the shape inside its slot: no overlaps
    cx = (col + 0.5) * slot + rng.uniform(-room, room)
    cy = (row + 0.5) * slot + rng.uniform(-room, room)
    return (cx - half, cy - half, cx + half, cy + half)
