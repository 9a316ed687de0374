"""Bad data in every modality, with real broken files: skipped, named and counted; or a clear DataError."""

from __future__ import annotations

import io
import json
import logging
import shutil
from pathlib import Path

import pytest
from PIL import Image

from attend.data import DataModule, ParallelText
from attend.data.audio import JsonlManifest
from attend.data.bad_samples import BadSamples, DataError, Skipped
from attend.data.images import Flickr8k
from tests.helpers.audio import make_datamodule, write_manifest
from tests.helpers.datamodules import text_datamodule
from tests.helpers.images import FLICKR8K, GIRL, FileSource, datamodule, image_file, ready, record

GOOD_PAIRS = [(f"ein haus nummer {i}", f"a house number {i}") for i in range(16)]


# the policy itself ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_error": "ignore"}, r"data\.on_error must be one of skip, raise; got 'ignore'"),
        ({"max_skip_fraction": 1.5}, r"data\.max_skip_fraction must be a number from 0 to 1"),
        ({"max_skip_fraction": -0.1}, r"data\.max_skip_fraction must be a number from 0 to 1"),
    ],
)
def test_options_are_checked_when_the_data_module_is_built(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BadSamples(**options)
    with pytest.raises(ValueError, match=message):
        text_datamodule(ParallelText("nowhere"), **options)


def test_fraction_compounds_over_stages_and_resets_on_a_new_pass() -> None:
    policy = BadSamples(max_skip_fraction=0.5)
    policy.begin("train", "files")
    policy.skip("train", "files", "a.wav", "missing file", "gone")
    policy.end("train", "files", 4, "utterances")
    policy.begin("train", "length")
    policy.skip("train", "length", "b.wav", "over 20 s", "too long")
    policy.end("train", "length", 3, "utterances")
    assert policy.fraction("train") == pytest.approx(1 - (3 / 4) * (2 / 3))  # half of the split lost
    assert policy.skipped == {"train": 2, "val": 0, "test": 0}
    policy.begin("train", "length")  # the same stage again (re-tokenizing): its old skips are forgotten
    policy.end("train", "length", 3, "utterances")
    assert policy.skipped["train"] == 1 and policy.summary()["data/skip_fraction_train"] == 0.25


# text --------------------------------------------------------------------------------------------
def write_corpus(root: Path) -> Path:
    """Clean val/test; a train split whose lines 2-5 are bad: empty, whitespace only, not UTF-8, too long."""
    root.mkdir()
    src = [p[0].encode() for p in GOOD_PAIRS]
    tgt = [p[1].encode() for p in GOOD_PAIRS]
    src[1], tgt[2] = b"", b"   \t "
    src[3] = "Gr\xfc\xdfe an alle".encode("latin-1")  # ü and ß in Latin-1: not UTF-8
    src[4] = b"ein sehr langer satz mit viel zu vielen worten darin"
    (root / "train.de").write_bytes(b"\n".join(src) + b"\n")
    (root / "train.en").write_bytes(b"\n".join(tgt) + b"\n")
    for split in ("val", "test"):
        (root / f"{split}.de").write_text("ein haus\nzwei haus\n", encoding="utf-8")
        (root / f"{split}.en").write_text("a house\ntwo house\n", encoding="utf-8")
    return root


def text_module(root: Path, **options) -> DataModule:
    dm = text_datamodule(ParallelText(root), max_source_len=6, **options)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_text_skips_empty_whitespace_undecodable_and_long_lines(tmp_path: Path, caplog) -> None:
    root = write_corpus(tmp_path / "corpus")
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        dm = text_module(root, max_skip_fraction=0.3)
    for where in ("train.de:2", "train.en:3", "train.de:4"):
        assert str(root / where) in caplog.text
    assert "not valid UTF-8" in caplog.text and "'ein sehr langer satz" in caplog.text
    assert dm.skipped == {"train": 4, "val": 0, "test": 0}
    assert dm.bad_samples.reasons("train") == {"empty line": 2, "invalid UTF-8": 1, "source over max_source_len": 1}
    assert len(dm.datasets["train"]) == len(GOOD_PAIRS) - 4 and len(dm.datasets["val"]) == 2
    summary = dm.skip_summary()
    assert summary["data/skipped_train"] == 4 and summary["data/skipped_val"] == 0
    assert summary["data/skip_fraction_train"] == pytest.approx(4 / 16)
    assert "data train: skipped 4 samples" in caplog.text


def test_text_raise_names_the_file_line_and_problem(tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "corpus")
    with pytest.raises(DataError, match=rf"{root / 'train.de'}:2: the line is empty .*data\.on_error=skip"):
        text_module(root, on_error="raise")
    (root / "train.de").write_bytes((root / "train.de").read_bytes().replace(b"\n\n", b"\nein\n", 1))
    (root / "train.en").write_bytes((root / "train.en").read_bytes().replace(b"   \t ", b"one"))
    with pytest.raises(DataError, match=r"train\.de:4: not valid UTF-8 \(invalid start byte\)"):
        text_module(root, on_error="raise")


def test_text_too_many_skips_stop_the_run(tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "corpus")
    message = (
        r"18\.8% of the train split was skipped as bad data \(3 of 16 pairs, reading the text\), more than "
        r"data\.max_skip_fraction=0\.1\. Most common problems: empty line: 2, invalid UTF-8: 1\. "
        r"First skipped: .*train\.de:2: the line is empty; .*raise data\.max_skip_fraction"
    )
    with pytest.raises(DataError, match=message):
        text_module(root)  # the default limit, 0.1


# images ------------------------------------------------------------------------------------------
def broken_images(folder: Path) -> dict[str, str]:
    """A truncated PNG, a truncated JPEG, random bytes named .jpg, and a path with no file."""
    folder.mkdir()
    for name, fmt in (("truncated.png", "PNG"), ("truncated.jpg", "JPEG")):
        buffer = io.BytesIO()
        Image.effect_noise((48, 48), 60).convert("RGB").save(buffer, fmt)
        (folder / name).write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    (folder / "random.jpg").write_bytes(bytes(range(256)) * 4)
    return {name: str(folder / name) for name in ("truncated.png", "truncated.jpg", "random.jpg", "missing.jpg")}


def image_splits(tmp_path: Path, good: int = 12) -> tuple[dict, dict[str, str]]:
    bad = broken_images(tmp_path / "bad")
    colours = [(20 * i, 255 - 20 * i, 90) for i in range(good)]
    train = [record(image_file(tmp_path, f"good{i}.png", c), f"box number {i}") for i, c in enumerate(colours)]
    train[3:3] = [record(path) for path in bad.values()]
    splits = {
        "train": train,
        "val": [record(image_file(tmp_path, "val.png", (1, 2, 3)), "a box")],
        "test": [record(image_file(tmp_path, "test.png", (3, 2, 1)), "a box")],
    }
    return splits, bad


def test_images_skip_truncated_random_and_missing_files(tmp_path: Path, caplog) -> None:
    splits, bad = image_splits(tmp_path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        dm = ready(datamodule(FileSource(tmp_path, splits), tmp_path / "cache", max_skip_fraction=0.3))
    for path in bad.values():
        assert path in caplog.text
    assert "skipped 4 of 16 images of the train split (corrupt image: 3, missing file: 1)" in caplog.text
    assert dm.skipped == {"train": 4, "val": 0, "test": 0} and len(dm.datasets["train"]) == 12
    assert dm.skip_summary()["data/skip_fraction_train"] == pytest.approx(0.25)


def test_images_raise_names_the_file(tmp_path: Path) -> None:
    splits, bad = image_splits(tmp_path)
    dm = datamodule(FileSource(tmp_path, splits), None, on_error="raise")
    with pytest.raises(DataError, match=rf"{bad['truncated.png']}: .*truncated.*corrupt image, train split"):
        ready(dm)
    splits["train"] = [r for r in splits["train"] if r.path != bad["truncated.png"]]
    splits["train"][3:6] = []  # now the missing file is the first bad one
    splits["train"].insert(0, record(bad["missing.jpg"]))
    with pytest.raises(DataError, match=r"missing\.jpg' does not exist \(missing file, train split\)"):
        ready(datamodule(FileSource(tmp_path, splits), None, on_error="raise"))


def test_images_too_many_skips_stop_the_run(tmp_path: Path) -> None:
    splits, _ = image_splits(tmp_path)
    message = r"25\.0% of the train split .*\(4 of 16 images, reading the files\).*corrupt image: 3"
    with pytest.raises(DataError, match=message):
        ready(datamodule(FileSource(tmp_path, splits), None))


def test_caption_file_lines_undecodable_or_empty_are_skipped(tmp_path: Path, caplog) -> None:
    root = tmp_path / "flickr8k"
    shutil.copytree(FLICKR8K, root)
    token = root / "Flickr8k.token.txt"
    lines = token.read_bytes().splitlines()
    lines[1] = f"{GIRL}#1\t".encode() + "Ein Mädchen".encode("latin-1")
    lines[2] = f"{GIRL}#2\t   ".encode()
    token.write_bytes(b"\n".join(lines) + b"\n")
    train = Flickr8k(root).splits()["train"]
    skipped = [item for item in train if isinstance(item, Skipped)]
    assert [(s.key, s.reason) for s in skipped] == [(f"{token}:2", "invalid UTF-8"), (f"{token}:3", "empty caption")]
    (girl,) = [item for item in train if not isinstance(item, Skipped)]
    assert girl.key == GIRL and len(girl.captions) == 3
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        dm = ready(datamodule(Flickr8k(root), tmp_path / "cache", max_skip_fraction=1.0))
    assert f"{token}:2" in caplog.text and f"{token}:3" in caplog.text
    assert dm.bad_samples.reasons() == {"invalid UTF-8": 1, "empty caption": 1}
    assert dm.skipped == {"train": 2, "val": 0, "test": 0} and len(dm.datasets["train"]) == 3  # its good captions
    with pytest.raises(DataError, match=rf"{token}:2: line 2 is not valid UTF-8"):
        ready(datamodule(Flickr8k(root), tmp_path / "cache", on_error="raise"))


# audio -------------------------------------------------------------------------------------------
def broken_manifest(tmp_path: Path) -> tuple[JsonlManifest, Path]:
    """Ten training WAVs of which one is garbage, one is empty, one is gone and one is too long; plus a
    manifest line that is not UTF-8."""
    audio = tmp_path / "audio"
    durations = [0.5, 0.6, 0.7, 0.5, 0.8, 0.6, 0.9, 4.0, 0.5, 0.6]
    train = Path(write_manifest(audio, "train", durations, [f"word {i}" for i in range(10)]))
    (audio / "train_1.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt garbage" * 10)
    (audio / "train_2.wav").write_bytes(b"")
    (audio / "train_5.wav").unlink()
    line = json.dumps({"audio_filepath": "x.wav", "text": "TEXT", "duration": 0.5}).encode()
    train.write_bytes(train.read_bytes() + line.replace(b"TEXT", "f\xfcr".encode("latin-1")) + b"\n")
    val = write_manifest(audio, "val", [0.6], ["one"])
    test = write_manifest(audio, "test", [0.7], ["two"])
    return JsonlManifest(train, val, test), audio


@pytest.mark.parametrize("precompute", [True, False])
def test_audio_skips_garbage_empty_missing_long_and_undecodable(tmp_path: Path, caplog, precompute: bool) -> None:
    source, audio = broken_manifest(tmp_path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        dm = make_datamodule(source, tmp_path, precompute=precompute, max_skip_fraction=0.5, spec_augment=None)
    for name in ("train_1.wav", "train_2.wav", "train_5.wav", "train.jsonl:11", "train_7"):
        assert name in caplog.text
    reasons = {"corrupt audio": 2, "missing file": 1, "invalid UTF-8": 1, "source over max_source_len": 1}
    assert dm.bad_samples.reasons("train") == reasons and dm.skipped == {"train": 5, "val": 0, "test": 0}
    assert len(dm.datasets["train"]) == 6 and dm.skip_summary()["data/skip_fraction_train"] == pytest.approx(5 / 11)


def test_audio_raise_names_the_file(tmp_path: Path) -> None:
    source, audio = broken_manifest(tmp_path)
    source.files["train"].write_bytes(source.files["train"].read_bytes().splitlines(keepends=True)[0])
    (audio / "train_0.wav").write_bytes(b"")
    with pytest.raises(DataError, match=rf"{audio / 'train_0.wav'}: audio file .*corrupt audio, train split"):
        make_datamodule(source, tmp_path, on_error="raise")


def test_audio_too_many_skips_stop_the_run(tmp_path: Path) -> None:
    source, _ = broken_manifest(tmp_path)
    with pytest.raises(DataError, match=r"of the train split was skipped .*max_skip_fraction=0\.1.*missing file"):
        make_datamodule(source, tmp_path, max_skip_fraction=0.1)
