"""Stores that cannot go stale: keys cover each file's size and date, and repair keeps only shards that agree with
the manifest (issue 27, item 5)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import soundfile
from PIL import Image

from attend.data import CharTokenizer, DataModule, WordTokenizer
from attend.data.audio import Utterance
from attend.data.audio.features import LogMelFrontEnd
from attend.data.images import ImageCaption
from attend.data.store import Shard, file_stamp, prepared_store, source_settings
from tests.helpers.datamodules import caption_datamodule as image_datamodule
from tests.helpers.datamodules import speech_datamodule
from tests.helpers.images import FileSource, stored_keys, stored_pixels

SIZE = 32


def image(folder: Path, name: str, colour: tuple[int, int, int] | None) -> str:
    path = folder / name
    if colour is None:
        path.write_bytes(b"not an image at all" * 4)
    else:
        Image.new("RGB", (10, 10), colour).save(path)
    return str(path)


def caption_datamodule(root: Path, cache: Path) -> DataModule:
    record = lambda path, caption: ImageCaption(key=Path(path).name, captions=(caption,), path=path)  # noqa: E731
    splits = {
        "train": [record(str(root / "red.png"), "a red box"), record(str(root / "blue.png"), "a blue box")],
        "val": [record(str(root / "green.png"), "a green box")],
        "test": [record(str(root / "grey.png"), "a grey box")],
    }
    dm = image_datamodule(FileSource(root, splits), WordTokenizer(), image_size=SIZE, cache_dir=cache,
                          max_skip_fraction=1.0, precompute_features=False)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_a_restored_image_is_read_again(tmp_path: Path) -> None:
    root, cache = tmp_path / "images", tmp_path / "cache"
    root.mkdir()
    for name, colour in (("red.png", (220, 30, 30)), ("green.png", (30, 160, 50)), ("grey.png", (99, 99, 99))):
        image(root, name, colour)
    image(root, "blue.png", None)  # corrupt: a recorded skip
    assert stored_keys(caption_datamodule(root, cache), "train") == ["red.png"]
    image(root, "blue.png", (30, 70, 220))  # restored
    restored = caption_datamodule(root, cache)
    assert stored_keys(restored, "train") == ["red.png", "blue.png"] and len(restored.datasets["train"]) == 2
    pixel = stored_pixels(restored, "train")[1, :, 16, 16].tolist()
    assert pixel == [30, 70, 220]


def test_a_changed_audio_file_is_read_again(tmp_path: Path) -> None:
    paths = {}
    for split in ("train", "val", "test"):
        paths[split] = tmp_path / f"{split}.wav"
        soundfile.write(paths[split], np.zeros(1600, dtype=np.float32), 16000)

    class Clips:
        def settings(self) -> dict:
            return {"root": str(tmp_path)}

        def splits(self) -> dict[str, list[Utterance]]:
            return {s: [Utterance(key=s, path=str(p), text="a b")] for s, p in paths.items()}

    def frames() -> list[int]:
        """The training utterance's feature frames, known from its audio header (precompute off)."""
        dm = speech_datamodule(Clips(), CharTokenizer(), LogMelFrontEnd(n_mels=40), cache_dir=tmp_path / "cache",
                               precompute=False, max_skip_fraction=1.0)
        dm.prepare_data()
        dm.setup("fit")
        return dm.encoded["train"].column("source_size").tolist()

    assert frames() == [LogMelFrontEnd(n_mels=40).num_frames(1600)]
    soundfile.write(paths["train"], np.zeros(3200, dtype=np.float32), 16000)  # re-recorded, twice as long
    assert frames() == [LogMelFrontEnd(n_mels=40).num_frames(3200)]


def test_a_settings_file_is_stamped(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text("one\n")

    class FromManifest:
        def settings(self) -> dict:
            return {"manifest": str(manifest), "n_val": 3}

    before = source_settings(FromManifest())
    assert before["file stamps"] == {"manifest": file_stamp(manifest)} and before["n_val"] == 3
    manifest.write_text("one\ntwo\n")
    assert source_settings(FromManifest()) != before
    assert file_stamp(tmp_path / "absent") is None


# repair ----------------------------------------------------------------------------------------------
def numbers(chunk: list[int], first: int) -> Shard:
    return Shard({"value": pa.array(chunk, type=pa.int64())})


def test_a_readable_wrong_shard_is_rebuilt(tmp_path: Path, caplog) -> None:
    good = prepared_store(tmp_path / "good", range(0, 30), numbers, shard_size=10)
    other = prepared_store(tmp_path / "other", range(100, 125), numbers, shard_size=10)
    assert len(good) == 30 and len(other) == 25
    # the good store's last shard replaced by the other store's (readable, another store's rows)
    shutil.copy(tmp_path / "other" / "shard-00002.arrow", tmp_path / "good" / "shard-00002.arrow")
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        repaired = prepared_store(tmp_path / "good", range(0, 30), numbers, shard_size=10)
    assert "damaged" in caplog.text
    assert repaired.column("value").tolist() == list(range(30))


def test_a_shard_of_another_range_is_not_reused_without_a_manifest(tmp_path: Path) -> None:
    prepared_store(tmp_path / "s", range(0, 30), numbers, shard_size=10)
    folder = tmp_path / "s"
    (folder / "manifest.json").write_text("{ garbled")
    os.replace(folder / "shard-00000.arrow", folder / "shard-00001.arrow")  # shard 0's rows where 1's belong
    repaired = prepared_store(folder, range(0, 30), numbers, shard_size=10)
    assert repaired.column("value").tolist() == list(range(30))
    entries = json.loads((folder / "manifest.json").read_text())["shards"]
    assert [(e["first"], e["items"]) for e in entries] == [(0, 10), (10, 10), (20, 10)]
