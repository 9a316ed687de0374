"""Image-caption sources: shape scenes, Tux Paint stamps, emoji, Flickr8k, Karpathy JSON, and read_rgb."""

from __future__ import annotations

import itertools
import json
import logging
import re
import shutil
import time
from pathlib import Path

import pytest
from PIL import Image

from attend.data.bad_samples import Skipped
from attend.data.images import (
    CaptionDataError,
    EmojiImages,
    Flickr8k,
    ImageCaption,
    ImageReadError,
    KarpathyJSON,
    ShapeScenes,
    TuxPaintStamps,
    read_rgb,
)
from attend.data.images.emoji_images import NOTO_COLOR_EMOJI
from attend.data.images.shapes import COLOURS
from attend.data.images.tuxpaint import TUXPAINT_STAMPS
from tests.helpers.paths import FIXTURES

FLICKR8K = FIXTURES / "flickr8k"
KARPATHY = FIXTURES / "karpathy"
GIRL, DOGS, RAINBOW = "1000268201_693b08cb0e.jpg", "1001773457_577c3a7d70.jpg", "1002674143_1b742ab4b8.jpg"


def keys(records: list[ImageCaption]) -> list[str]:
    return [r.key for r in records]


@pytest.fixture
def flickr_copy(tmp_path: Path) -> Path:
    """A writable copy of the Flickr8k fixture."""
    return Path(shutil.copytree(FLICKR8K, tmp_path / "flickr8k"))


# read_rgb ---------------------------------------------------------------------------------------
def test_read_rgb_composites_transparency_on_white(tmp_path: Path) -> None:
    rgba = Image.new("RGBA", (4, 2), (0, 0, 0, 0))
    rgba.putpixel((1, 0), (255, 0, 0, 255))
    rgba.putpixel((2, 0), (0, 0, 255, 128))
    rgba.save(tmp_path / "rgba.png")
    img = read_rgb(tmp_path / "rgba.png")
    assert img.mode == "RGB" and img.size == (4, 2)
    assert img.getpixel((0, 0)) == (255, 255, 255)  # transparent black -> white, not black
    assert img.getpixel((1, 0)) == (255, 0, 0)
    r, g, b = img.getpixel((2, 0))
    assert 120 <= r <= 135 and 120 <= g <= 135 and b == 255  # half blue over white
    palette = Image.new("P", (2, 1), 0)
    palette.putpalette([0, 0, 0, 0, 255, 0])
    palette.putpixel((1, 0), 1)
    palette.save(tmp_path / "p.png", transparency=0)
    assert list(read_rgb(tmp_path / "p.png").getdata()) == [(255, 255, 255), (0, 255, 0)]
    la = Image.new("LA", (1, 1), (0, 0))
    la.save(tmp_path / "la.png")
    assert read_rgb(tmp_path / "la.png").getpixel((0, 0)) == (255, 255, 255)


def test_read_rgb_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ImageReadError, match=r"nope\.jpg' does not exist"):
        read_rgb(tmp_path / "nope.jpg")
    data = (FLICKR8K / "Flicker8k_Dataset" / GIRL).read_bytes()
    (tmp_path / "truncated.jpg").write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageReadError, match=r"(?i)truncated\.jpg' cannot be read: .*truncated"):
        read_rgb(tmp_path / "truncated.jpg")
    (tmp_path / "garbage.jpg").write_bytes(b"this is not a JPEG at all" * 10)
    with pytest.raises(ImageReadError, match=r"garbage\.jpg' cannot be read"):
        read_rgb(tmp_path / "garbage.jpg")


# Flickr8k ---------------------------------------------------------------------------------------
def test_flickr8k_fixture() -> None:
    source = Flickr8k(FLICKR8K)
    splits = source.splits()
    assert {split: keys(records) for split, records in splits.items()} == {
        "train": [GIRL],
        "val": [DOGS],
        "test": [RAINBOW],
    }
    girl = splits["train"][0]
    assert len(girl.captions) == 5 and girl.captions[0].startswith("A child in a pink dress")
    assert girl.captions[4] == "A little girl in a pink dress going into a wooden cabin ."
    assert girl.path == str(FLICKR8K / "Flicker8k_Dataset" / GIRL)
    img = source.load_image(girl)
    assert img.mode == "RGB" and img.size == (32, 24)
    assert Flickr8k(**source.settings()).settings() == source.settings()


def test_flickr8k_caption_order_blank_lines_and_missing_image_file(flickr_copy: Path) -> None:
    token = flickr_copy / "Flickr8k.token.txt"
    lines = token.read_text().splitlines()
    token.write_text("\n".join(reversed(lines)) + "\n\n\n")  # numbers out of order, blank lines at the end
    (flickr_copy / "Flicker8k_Dataset" / DOGS).unlink()
    source = Flickr8k(flickr_copy)
    splits = source.splits()
    assert splits["train"][0].captions == Flickr8k(FLICKR8K).splits()["train"][0].captions
    dogs = splits["val"][0]  # kept although its file is gone
    assert dogs.key == DOGS and len(dogs.captions) == 5
    with pytest.raises(ImageReadError, match=re.escape(DOGS)):
        source.load_image(dogs)


def test_flickr8k_absolute_paths(tmp_path: Path) -> None:
    split = tmp_path / "mine.txt"
    split.write_text(f"{RAINBOW}\n{GIRL}\n")
    absolute = {"captions": str(FLICKR8K / "Flickr8k.token.txt"), "images": str(FLICKR8K / "Flicker8k_Dataset")}
    splits = Flickr8k(tmp_path, train=str(split), val=str(split), test=str(split), **absolute).splits()
    assert keys(splits["train"]) == [RAINBOW, GIRL]


def test_flickr8k_missing_files(tmp_path: Path, flickr_copy: Path) -> None:
    with pytest.raises(CaptionDataError, match=r"folder .*does not exist.*Flickr8k_text\.zip"):
        Flickr8k(tmp_path / "nowhere").splits()
    (flickr_copy / "Flickr_8k.devImages.txt").unlink()
    with pytest.raises(CaptionDataError, match=r"Flickr_8k\.devImages\.txt' does not exist: .*one image file name"):
        Flickr8k(flickr_copy).splits()
    (flickr_copy / "Flickr8k.token.txt").unlink()
    with pytest.raises(CaptionDataError, match=r"Flickr8k\.token\.txt' does not exist: .*IMAGE\.jpg#N<TAB>caption"):
        Flickr8k(flickr_copy).splits()
    with pytest.raises(CaptionDataError, match=r"image folder .*Flickr_Dataset' does not exist.*JPEGs"):
        Flickr8k(FLICKR8K, images="Flickr_Dataset").splits()


@pytest.mark.parametrize(
    "bad_line",
    [f"{GIRL}#5 no tab here", f"{GIRL}\tno hash before the tab", "#0\tno image name"],
    ids=["no-tab", "no-hash", "no-name"],
)
def test_flickr8k_malformed_token_line(flickr_copy: Path, bad_line: str) -> None:
    token = flickr_copy / "Flickr8k.token.txt"
    lines = token.read_text().splitlines()
    token.write_text("\n".join([*lines[:2], "", bad_line, *lines[2:]]) + "\n")
    with pytest.raises(CaptionDataError, match=r"Flickr8k\.token\.txt:4: expected `IMAGE\.jpg#N<TAB>caption`"):
        Flickr8k(flickr_copy).splits()


def test_flickr8k_bad_caption_lines_are_skipped_items_before_their_image(flickr_copy: Path) -> None:
    token = flickr_copy / "Flickr8k.token.txt"
    original = Flickr8k(FLICKR8K).splits()
    lines = token.read_bytes().splitlines()
    lines[1] = f"{GIRL}#1\t".encode() + "Ein Mädchen".encode("latin-1")  # not UTF-8
    lines[2] = f"{GIRL}#2\t   ".encode()
    lines[5:10] = [f"{DOGS}#{n}\t".encode() for n in range(5)]  # every caption of DOGS empty
    lines.append(b"999_unlisted.jpg#0\t")  # an image no split lists: its bad line is not counted
    token.write_bytes(b"\n".join(lines) + b"\n")
    (flickr_copy / "Flickr_8k.trainImages.txt").write_text(f"{RAINBOW}\n{GIRL}\n")
    (flickr_copy / "Flickr_8k.testImages.txt").write_text("")
    source = Flickr8k(flickr_copy)
    splits = source.splits()
    girl, rainbow = original["train"][0], original["test"][0]
    assert splits["train"] == [
        ImageCaption(RAINBOW, rainbow.captions, str(flickr_copy / "Flicker8k_Dataset" / RAINBOW)),
        Skipped(f"{token}:2", "invalid UTF-8",
                "line 2 is not valid UTF-8 (invalid continuation byte); re-save the file as UTF-8"),
        Skipped(f"{token}:3", "empty caption", f"the caption of {GIRL}#2 on line 3 is empty"),
        ImageCaption(GIRL, (girl.captions[0], *girl.captions[3:]), str(flickr_copy / "Flicker8k_Dataset" / GIRL)),
    ]
    # an image left without captions gives only its Skipped items, in its split
    assert splits["val"] == [
        Skipped(f"{token}:{n + 6}", "empty caption", f"the caption of {DOGS}#{n} on line {n + 6} is empty")
        for n in range(5)
    ]
    assert splits["test"] == [] and not hasattr(source, "bad_samples")


def test_flickr8k_image_without_captions(flickr_copy: Path) -> None:
    (flickr_copy / "Flickr_8k.testImages.txt").write_text(f"{RAINBOW}\n\n999_unknown.jpg\n")
    message = r"Flickr_8k\.testImages\.txt:3: image '999_unknown\.jpg' has no captions in .*Flickr8k\.token\.txt"
    with pytest.raises(CaptionDataError, match=message):
        Flickr8k(flickr_copy).splits()


# Karpathy JSON ----------------------------------------------------------------------------------
def test_karpathy_fixture_and_restval() -> None:
    source = KarpathyJSON(KARPATHY / "dataset_flickr8k.json", KARPATHY / "images")
    splits = source.splits()
    assert {split: keys(records) for split, records in splits.items()} == {
        "train": ["2513260012_03d33305cf.jpg", "2677656448_6b7e7702af.jpg"],  # train, then restval
        "val": ["2903617548_d3e38d7f88.jpg"],
        "test": ["3385593926_d3e9c21170.jpg"],
    }
    first = splits["train"][0]
    assert first.captions[0] == "A black dog is running after a white dog in the snow ." and len(first.captions) == 5
    assert first.captions[1] == "Black dog chasing brown dog through snow"
    assert [len(r.captions) for r in splits["val"] + splits["test"]] == [3, 4]
    assert first.path == str(KARPATHY / "images" / "2513260012_03d33305cf.jpg")
    assert all(source.load_image(r).mode == "RGB" for records in splits.values() for r in records)
    no_restval = KarpathyJSON(KARPATHY / "dataset_flickr8k.json", KARPATHY / "images", use_restval=False)
    assert keys(no_restval.splits()["train"]) == ["2513260012_03d33305cf.jpg"]
    assert no_restval.settings()["use_restval"] is False
    assert KarpathyJSON(**source.settings()).settings() == source.settings()


def write_json(path: Path, images: list[dict]) -> Path:
    path.write_text(json.dumps({"images": images, "dataset": "coco"}, indent=1))
    return path


def coco_image(**changes: object) -> dict:
    image = {
        "filepath": "val2014",
        "filename": "COCO_val2014_000000391895.jpg",
        "split": "test",
        "imgid": 0,
        "sentences": [{"raw": "  A man riding a bike.  ", "tokens": ["a", "man", "riding", "a", "bike"]}],
    }
    return {**image, **changes}


def test_karpathy_filepath_and_tokens_fallback(tmp_path: Path) -> None:
    sentences = [{"tokens": ["a", "man", "with", "a", "red", "helmet"]}, {"raw": "A man on a dirt bike."}]
    path = write_json(tmp_path / "dataset_coco.json", [coco_image(), coco_image(filename="b.jpg", sentences=sentences)])
    test = KarpathyJSON(path, tmp_path / "coco").splits()["test"]
    assert keys(test) == ["val2014/COCO_val2014_000000391895.jpg", "val2014/b.jpg"]
    assert test[0].path == str(tmp_path / "coco" / "val2014" / "COCO_val2014_000000391895.jpg")
    assert test[0].captions == ("A man riding a bike.",)
    assert test[1].captions == ("a man with a red helmet", "A man on a dirt bike.")


def test_karpathy_errors(tmp_path: Path) -> None:
    with pytest.raises(CaptionDataError, match=r"dataset_coco\.json' does not exist: .*\"images\""):
        KarpathyJSON(tmp_path / "dataset_coco.json", tmp_path).splits()
    broken = tmp_path / "broken.json"
    broken.write_text('{"images": [\n  {"filename": "a.jpg",\n   "split": "train" "sentences": []}\n]}')
    with pytest.raises(CaptionDataError, match=r"broken\.json:3:\d+: invalid JSON"):
        KarpathyJSON(broken, tmp_path).splits()
    (tmp_path / "no_images.json").write_text('{"dataset": "coco"}')
    with pytest.raises(CaptionDataError, match=r'no_images\.json: missing key "images"'):
        KarpathyJSON(tmp_path / "no_images.json", tmp_path).splits()
    no_split = coco_image()
    del no_split["split"]
    with pytest.raises(CaptionDataError, match=r'image 1 is missing the key "split"'):
        KarpathyJSON(write_json(tmp_path / "a.json", [coco_image(), no_split]), tmp_path).splits()
    with pytest.raises(CaptionDataError, match=r'image 0 is missing the key "filename"'):
        KarpathyJSON(write_json(tmp_path / "b.json", [{"split": "val", "sentences": []}]), tmp_path).splits()
    with pytest.raises(CaptionDataError, match=r"image 0 has split 'dev'; expected one of train, val, test, restval"):
        KarpathyJSON(write_json(tmp_path / "c.json", [coco_image(split="dev")]), tmp_path).splits()
    with pytest.raises(CaptionDataError, match=r'image 0 \(x\.jpg\), sentence 1: missing key "raw"'):
        bad = coco_image(filename="x.jpg", sentences=[{"raw": "ok"}, {"sentid": 3}])
        KarpathyJSON(write_json(tmp_path / "d.json", [bad]), tmp_path).splits()
    with pytest.raises(CaptionDataError, match=r"image 0 \(x\.jpg\) has no non-empty sentence"):
        KarpathyJSON(write_json(tmp_path / "e.json", [coco_image(filename="x.jpg", sentences=[])]), tmp_path).splits()


# Shape scenes -----------------------------------------------------------------------------------
PHRASE = r"a (small|large) (red|green|blue|yellow) (circle|square|triangle)"
CAPTION = re.compile(rf"^{PHRASE}(?: (?:to the left of|above) {PHRASE})*$")


def slot(box: tuple[float, float, float, float]) -> tuple[int, int]:
    """(row, column) of the 3x3 slot holding the box's centre."""
    return int((box[1] + box[3]) / 2 * 3), int((box[0] + box[2]) / 2 * 3)


def test_shapes_deterministic_and_independent_of_sizes() -> None:
    start = time.perf_counter()
    default = ShapeScenes().splits()
    assert time.perf_counter() - start < 10  # layout only, nothing rendered
    assert {split: len(records) for split, records in default.items()} == {"train": 4000, "val": 300, "test": 300}
    assert ShapeScenes().splits() == default
    small = ShapeScenes(n_train=20, n_val=5, n_test=0).splits()
    assert small["train"] == default["train"][:20] and small["val"] == default["val"][:5] and small["test"] == []
    assert ShapeScenes(seed=99).splits()["train"][:20] != small["train"]
    all_keys = [r.key for records in default.values() for r in records]
    assert len(set(all_keys)) == len(all_keys) and all_keys[0] == "shapes-train-0"
    assert default["val"][0].key == "shapes-val-0" and default["test"][-1].key == "shapes-test-299"
    one = ShapeScenes(max_objects=1, n_train=50).splits()["train"]
    assert all(len(r.objects) == 1 and len(r.captions[0].split()) == 4 for r in one)
    source = ShapeScenes(n_train=3, image_size=32)
    assert ShapeScenes(**source.settings()).settings() == source.settings()


def test_shapes_caption_grammar_and_objects() -> None:
    records = ShapeScenes(n_train=300).splits()["train"]
    seen_counts = set()
    for record in records:
        caption = record.captions[0]
        words = caption.split()
        assert len(record.captions) == 1 and CAPTION.match(caption), caption
        seen_counts.add(len(record.objects))
        assert caption.count(" a ") + 1 == len(record.objects)
        for obj in record.objects:
            assert words[obj.word_index] == obj.kind
            assert 0 <= obj.box[0] < obj.box[2] <= 1 and 0 <= obj.box[1] < obj.box[3] <= 1
        for before, after in itertools.pairwise(record.objects):
            relation = words[before.word_index + 1 : after.word_index - 3]
            (row0, col0), (row1, col1) = slot(before.box), slot(after.box)
            assert relation == (["to", "the", "left", "of"] if row0 == row1 else ["above"]), caption
            assert (row0, col0) < (row1, col1) and (row0 < row1 or before.box[2] < after.box[0])
        for a, b in itertools.combinations(record.objects, 2):
            assert a.box[2] <= b.box[0] or b.box[2] <= a.box[0] or a.box[3] <= b.box[1] or b.box[3] <= a.box[1]
    assert seen_counts == {1, 2, 3}
    example = next(r for r in records if len(r.objects) == 2 and "left" in r.captions[0])
    assert re.fullmatch(rf"{PHRASE} to the left of {PHRASE}", example.captions[0])


def test_shapes_render_matches_layout() -> None:
    source = ShapeScenes(n_train=0, n_val=0, n_test=25, image_size=64)
    for record in source.splits()["test"]:
        img = source.load_image(record)
        assert img.mode == "RGB" and img.size == (64, 64)
        words = record.captions[0].split()
        inside = set()
        for obj in record.objects:
            x0, y0, x1, y1 = (v * 64 for v in obj.box)
            # the box centre is inside every kind of shape (also the triangle: apex up, base at the bottom)
            pixel = img.getpixel((int((x0 + x1) / 2), int((y0 + y1) / 2 + (y1 - y0) * 0.1)))
            nearest = min(COLOURS, key=lambda c: sum((p - q) ** 2 for p, q in zip(pixel, COLOURS[c], strict=True)))
            assert nearest == words[obj.word_index - 1], (record.captions[0], obj, pixel)
            inside |= {(x, y) for x in range(int(x0) - 1, int(x1) + 2) for y in range(int(y0) - 1, int(y1) + 2)}
        outside = [img.getpixel((x, y)) for x in range(64) for y in range(64) if (x, y) not in inside]
        assert min(min(p) for p in outside) >= 245, record.captions[0]


# Tux Paint stamps -------------------------------------------------------------------------------
def make_stamp(folder: Path, name: str, text: str | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGBA", (6, 4), (0, 128, 0, 255)).save(folder / f"{name}.png")
    if text is not None:
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")


def test_tuxpaint_on_a_small_tree(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for i in range(4):
        make_stamp(tmp_path / "animals" / "cats", f"cat{i}", f"A cat number {i}.\nde.utf8=Eine Katze.\n")
    make_stamp(tmp_path / "food", "apple", "\n  An apple.  \nfr.utf8=Une pomme.\n")
    make_stamp(tmp_path / "food", "apple_mirror", None)
    make_stamp(tmp_path / "food", "empty", "\n\n")
    make_stamp(tmp_path / "food", "french", "fr.utf8=Une poire.\n")
    with caplog.at_level(logging.INFO, logger="attend.data"):
        source = TuxPaintStamps(tmp_path, n_val=1, n_test=2, seed=7)
        splits = source.splits()
    assert "skipped 3 of 8" in caplog.text and source.skipped == 3
    assert [len(splits[s]) for s in ("train", "val", "test")] == [2, 1, 2]
    records = {r.key: r for records in splits.values() for r in records}
    assert records["food/apple.png"].captions == ("An apple.",)
    assert records["animals/cats/cat2.png"].captions == ("A cat number 2.",)
    assert records["food/apple.png"].path == str(tmp_path / "food" / "apple.png")
    assert TuxPaintStamps(tmp_path, n_val=1, n_test=2, seed=7).splits() == splits
    assert source.load_image(records["food/apple.png"]).getpixel((0, 0)) == (0, 128, 0)
    with pytest.raises(ValueError, match="leaves none to train on"):
        TuxPaintStamps(tmp_path, n_val=3, n_test=2).splits()


def test_tuxpaint_missing_root(tmp_path: Path) -> None:
    message = r"Tux Paint stamps are missing.*apt-get install tuxpaint-stamps-default.*data\.source\.root="
    with pytest.raises(FileNotFoundError, match=message):
        TuxPaintStamps(tmp_path / "stamps").splits()


@pytest.mark.skipif(not Path(TUXPAINT_STAMPS).is_dir(), reason="Debian package tuxpaint-stamps-default not installed")
def test_tuxpaint_installed_stamps() -> None:
    source = TuxPaintStamps()
    splits = source.splits()
    sizes = {split: len(records) for split, records in splits.items()}
    assert sizes["val"] == 100 and sizes["test"] == 120 and sizes["train"] > 300
    split_keys = [set(keys(records)) for records in splits.values()]
    assert all(a.isdisjoint(b) for a, b in itertools.combinations(split_keys, 2))
    assert all(r.key.endswith(".png") and r.captions[0] for records in splits.values() for r in records)
    img = source.load_image(splits["test"][0])
    assert img.mode == "RGB" and min(img.size) > 0
    assert TuxPaintStamps().splits()["test"] == splits["test"]


# Emoji ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def emoji_splits() -> tuple[EmojiImages, dict[str, list[ImageCaption]], float]:
    source = EmojiImages()
    start = time.perf_counter()
    splits = source.splits()
    return source, splits, time.perf_counter() - start


def test_emoji_missing_font(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"apt-get install fonts-noto-color-emoji.*data\.source\.font="):
        EmojiImages(tmp_path / "NoSuchEmoji.ttf").splits()


@pytest.mark.skipif(not Path(NOTO_COLOR_EMOJI).is_file(), reason="Debian package fonts-noto-color-emoji not installed")
def test_emoji_installed_font(emoji_splits: tuple[EmojiImages, dict[str, list[ImageCaption]], float]) -> None:
    source, splits, seconds = emoji_splits
    assert seconds < 60
    sizes = {split: len(records) for split, records in splits.items()}
    assert sizes["val"] == 300 and sizes["test"] == 300 and sizes["train"] > 1000
    split_keys = [set(keys(records)) for records in splits.values()]
    assert all(a.isdisjoint(b) for a, b in itertools.combinations(split_keys, 2))
    records = {r.key: r for records in splits.values() for r in records}
    assert all(re.fullmatch(r"U\+[0-9A-F]{4,6}(-U\+[0-9A-F]{4,6})*", key) for key in records)
    assert records["U+1F600"].captions == ("grinning face",)
    assert all(":" not in r.captions[0] and "_" not in r.captions[0] for r in records.values())
    assert source.dropped["blank"] + source.dropped["several glyphs"] > 0  # this font lacks the newest emoji
    for key in ("U+1F600", "U+1F468-U+200D-U+1F469-U+200D-U+1F467", splits["test"][0].key):
        img = source.load_image(records[key])
        assert img.mode == "RGB" and img.width == img.height and 30 <= img.width <= 160  # cropped to the ink
        assert img.getpixel((0, 0)) == (255, 255, 255)  # the margin
        assert len(set(img.resize((16, 16)).getdata())) > 5  # something is drawn
    assert EmojiImages(**source.settings()).settings() == source.settings()
