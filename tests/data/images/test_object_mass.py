"""Object masks (Tux Paint's alpha) from the file through the image store into eval batches; ObjectMass/ObjectArea."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from PIL import Image

from attend.config.compose import compose_config
from attend.data import DataModule, WordTokenizer
from attend.data.images import ImageCaption, TuxPaintStamps
from attend.data.images.pixels import square_resize, square_resize_mask, store_mask, store_pixels, to_uint8_tensor
from attend.data.images.record import read_alpha, read_rgb
from attend.data.images.tuxpaint import TUXPAINT_STAMPS
from attend.metrics import Decoded, ObjectArea, ObjectMass, cell_coverage
from attend.metrics.object_mass import area_matrix
from attend.search import SearchResult
from tests.helpers.datamodules import caption_datamodule

SIZE = 16


# reading and letterboxing the mask --------------------------------------------------------------
def stamp(path: Path, size: tuple[int, int] = (20, 10), box: tuple[int, int, int, int] = (2, 1, 8, 9)) -> str:
    """An RGBA stamp: a red rectangle ``box`` (x0, y0, x1, y1, pixels) opaque, the rest transparent."""
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    image.paste((200, 0, 0, 255), box)
    image.save(path)
    return str(path)


def test_read_alpha_gives_the_alpha_only_where_it_outlines_something(tmp_path: Path) -> None:
    mask = read_alpha(stamp(tmp_path / "a.png"))
    assert mask.mode == "L" and mask.size == (20, 10)
    assert mask.getpixel((3, 2)) == 255 and mask.getpixel((15, 5)) == 0
    Image.new("RGBA", (4, 4), (9, 9, 9, 255)).save(tmp_path / "opaque.png")  # alpha everywhere 255
    Image.new("RGB", (4, 4), (9, 9, 9)).save(tmp_path / "rgb.png")
    assert read_alpha(tmp_path / "opaque.png") is None and read_alpha(tmp_path / "rgb.png") is None
    palette = Image.new("P", (2, 1))
    palette.putpalette([255, 0, 0, 0, 255, 0])
    palette.putpixel((1, 0), 1)
    palette.save(tmp_path / "p.png", transparency=0)  # palette index 0 transparent
    assert list(read_alpha(tmp_path / "p.png").getdata()) == [0, 255]


def test_the_mask_is_letterboxed_exactly_like_the_pixels(tmp_path: Path) -> None:
    path = stamp(tmp_path / "wide.png", size=(40, 20), box=(4, 2, 16, 18))
    pixels = to_uint8_tensor(square_resize(read_rgb(path), SIZE))  # (3, 16, 16): padded on white above and below
    mask = square_resize_mask(read_alpha(path), SIZE)  # (16, 16) uint8
    assert mask.shape == (SIZE, SIZE) and mask.dtype == torch.uint8
    red = (pixels[1] < 128) & (pixels[0] > 128)  # (16, 16) where the object is drawn
    assert torch.equal(red, mask > 128)
    assert mask[:4].max() == 0 and mask[-4:].max() == 0  # the padding (rows 0-3 and 12-15) is background
    assert int(mask[8, 3]) == 255  # inside the object


# the metric -------------------------------------------------------------------------------------
def test_area_matrix_gives_exact_area_fractions() -> None:
    torch.testing.assert_close(area_matrix(5, 2)[0], torch.tensor([0.4, 0.4, 0.2, 0.0, 0.0], dtype=torch.float64))
    assert torch.allclose(area_matrix(64, 7).sum(dim=1), torch.ones(7, dtype=torch.float64))


def test_cell_coverage_is_the_area_average_of_the_mask_on_each_cell() -> None:
    masks = torch.zeros(2, 4, 4)
    masks[0, :2, :2] = 1.0  # the top-left quarter
    masks[1, :, 1] = 0.5  # half of a column
    coverage = cell_coverage(masks, (2, 2))  # (B, 4) row-major
    torch.testing.assert_close(coverage[0], torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(coverage[1], torch.tensor([0.25, 0.0, 0.25, 0.0], dtype=torch.float64))
    torch.testing.assert_close(cell_coverage(torch.ones(1, 5, 5), (3, 2)), torch.ones(1, 6, dtype=torch.float64))


EOS = 2


def hand_made() -> tuple[dict, SearchResult]:
    """Three images on a 2x2 grid: the object fills the top-left cell of the first; the second has no mask;
    the third's object fills the top half and its caption hit the length limit (no end token)."""
    masks = torch.zeros(3, 4, 4)
    masks[0, :2, :2] = 1.0
    masks[2, :2] = 1.0
    batch = {"object_masks": masks, "has_object_mask": torch.tensor([True, False, True])}
    tokens = torch.tensor([[5, 6, EOS], [5, EOS, 0], [5, 6, 7]])  # (B, T)
    weights = torch.zeros(3, 3, 4)  # (B, T, S)
    weights[0, 0] = torch.tensor([1.0, 0.0, 0.0, 0.0])  # all on the object
    weights[0, 1] = torch.tensor([0.5, 0.5, 0.0, 0.0])  # half
    weights[0, 2] = torch.tensor([0.0, 0.0, 0.0, 1.0])  # the end token: not counted
    weights[1] = 0.25  # no mask: not counted
    weights[2] = torch.tensor([0.0, 0.2, 0.8, 0.0])  # 0.2 on the object, three times
    result = SearchResult(tokens, torch.tensor([3, 2, 3]), weights, torch.zeros(3), EOS, grid=(2, 2))
    return batch, result


def test_object_mass_and_its_chance_level_on_hand_made_weights() -> None:
    batch, result = hand_made()
    mass, area = ObjectMass(), ObjectArea()
    for metric in (mass, area):
        metric.update(Decoded(batch, result, []))
    assert int(mass.count) == int(area.count) == 5  # 2 words of the first caption, 3 of the third
    assert float(mass.compute()) == pytest.approx((1.0 + 0.5 + 3 * 0.2) / 5)
    assert float(area.compute()) == pytest.approx((2 * 0.25 + 3 * 0.5) / 5)


def test_uniform_attention_scores_the_chance_level() -> None:
    batch, result = hand_made()
    uniform = SearchResult(result.tokens, result.lengths, torch.full((3, 3, 4), 0.25), result.scores, EOS, grid=(2, 2))
    mass, area = ObjectMass(), ObjectArea()
    for metric in (mass, area):
        metric.update(Decoded(batch, uniform, []))
    assert float(mass.compute()) == pytest.approx(float(area.compute()))


def test_batches_without_masks_and_memories_without_grid_are_not_counted() -> None:
    batch, result = hand_made()
    metric = ObjectMass()
    metric.update(Decoded({"references": []}, result, []))
    metric.update(Decoded(batch, SearchResult(result.tokens, result.lengths, result.weights, result.scores, EOS), []))
    assert int(metric.count) == 0 and float(metric.compute()) == 0.0


# through the cache and the datamodule -------------------------------------------------------------
class StampFiles:
    """A tiny source of RGBA stamps with ``load_mask``, counting the images it reads."""

    def __init__(self, splits: dict[str, list[ImageCaption]]) -> None:
        self._splits = splits
        self.loads = 0

    def settings(self) -> dict:
        return {"keys": sorted(r.key for records in self._splits.values() for r in records)}

    def splits(self) -> dict[str, list[ImageCaption]]:
        return self._splits

    def load_image(self, record: ImageCaption) -> Image.Image:
        self.loads += 1
        return read_rgb(record.path)

    def load_mask(self, record: ImageCaption) -> Image.Image | None:
        return read_alpha(record.path)


def stamp_splits(folder: Path) -> dict[str, list[ImageCaption]]:
    def rec(name: str, caption: str, opaque: bool = False) -> ImageCaption:
        path = folder / name
        if path.is_file():  # written once: a rewritten file is a changed one, read again (store keys stamp files)
            pass
        elif opaque:
            Image.new("RGB", (12, 12), (0, 90, 0)).save(path)
        else:
            stamp(path)
        return ImageCaption(key=name, captions=(caption,), path=str(path))

    return {
        "train": [rec(f"t{i}.png", f"a red block {i}") for i in range(4)],
        "val": [rec("v0.png", "a red block"), rec("v1.png", "a green square", opaque=True)],
        "test": [rec("s0.png", "a red block 1"), rec("s1.png", "a green square", opaque=True)],
    }


def stamp_datamodule(source, cache: Path) -> DataModule:
    dm = caption_datamodule(source, WordTokenizer(lowercase=True), image_size=SIZE, batch_size=4, eval_batch_size=4,
                            cache_dir=cache)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_eval_batches_carry_the_letterboxed_masks_and_which_images_have_one(tmp_path: Path) -> None:
    source = StampFiles(stamp_splits(tmp_path))
    dm = stamp_datamodule(source, tmp_path / "cache")
    batch = next(iter(dm.val_dataloader()))
    keys = batch["sources"]
    masks, has = batch["object_masks"], batch["has_object_mask"]  # (B, H, W), (B,)
    assert masks.shape == (2, SIZE, SIZE) and masks.dtype == torch.float32
    assert float(masks.min()) >= 0.0 and float(masks.max()) <= 1.0
    stamped = keys.index("v0.png")
    assert has.tolist() == [i == stamped for i in range(2)]
    expected = square_resize_mask(read_alpha(tmp_path / "v0.png"), SIZE).float() / 255
    torch.testing.assert_close(masks[stamped], expected)
    assert float(masks[1 - stamped].abs().sum()) == 0.0
    assert "object_masks" not in next(iter(dm.train_dataloader()))  # the training crop would move the object

    again = StampFiles(stamp_splits(tmp_path))
    cached = stamp_datamodule(again, tmp_path / "cache")
    assert again.loads == 0  # masks come from the store with the pixels
    torch.testing.assert_close(next(iter(cached.val_dataloader()))["object_masks"], masks)


def test_a_store_without_masks_is_not_read_for_a_source_with_masks(tmp_path: Path) -> None:
    splits = stamp_splits(tmp_path)
    plain = StampFiles(splits)
    plain.load_mask = None  # the same source before it had masks: same class and settings
    unmasked = stamp_datamodule(plain, tmp_path / "cache").encoded["val"]
    assert "mask" not in unmasked.column_names and not unmasked.meta["masked"]

    source = StampFiles(splits)
    masked = stamp_datamodule(source, tmp_path / "cache")
    store = masked.encoded["val"]
    assert store.folder != unmasked.folder
    assert source.loads == 8 and store.meta["masked"]  # every image read again, for its mask
    torch.testing.assert_close(store_mask(store, 0), square_resize_mask(read_alpha(tmp_path / "v0.png"), SIZE))
    assert store_mask(store, 1) is None  # the opaque picture has no mask
    assert torch.equal(store_pixels(store, 0), store_pixels(unmasked, 0)) and int(store_pixels(store, 0).max()) > 0
    again = StampFiles(splits)
    assert store_mask(stamp_datamodule(again, tmp_path / "cache").encoded["val"], 0) is not None and again.loads == 0


# configuration and the installed stamps -----------------------------------------------------------
def test_tux_paint_config_logs_object_mass_and_area_and_never_flips(tmp_path) -> None:
    cfg = compose_config(["task=caption"], output_dir=tmp_path)
    assert cfg.data.modality.hflip is False and cfg.data.source._target_.endswith("TuxPaintStamps")
    assert isinstance(instantiate(cfg.model.metrics.object_mass), ObjectMass)
    assert isinstance(instantiate(cfg.model.metrics.object_area), ObjectArea)
    other = compose_config(["task=caption", "data=flickr8k"], output_dir=tmp_path)
    assert "object_mass" not in other.model.metrics  # a data set without masks does not log it


@pytest.mark.skipif(not Path(TUXPAINT_STAMPS).is_dir(), reason="Debian package tuxpaint-stamps-default not installed")
def test_installed_stamps_with_a_real_alpha_mask() -> None:
    source = TuxPaintStamps()
    records = source.records()
    opaque = [r.key for r in records if source.load_mask(r) is None]
    assert len(records) == 785 and len(opaque) == 3  # 782 stamps outline their object
    assert all(key.startswith("town/roadsigns/stoplight_") for key in opaque)
    mask = square_resize_mask(source.load_mask(records[0]), 64)
    assert 0 < int(np.count_nonzero(mask.numpy())) < 64 * 64
