"""The data of the data pipeline's contract suite (data/test_contract.py), one small data set per modality, which
the cache repair tests damage too: a source that counts its reads, the data module over it, and its stores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from attend.data import CharTokenizer, DataModule
from attend.data.audio import JsonlManifest
from attend.data.bad_samples import Skipped
from attend.data.images import ShapeScenes
from tests.helpers.datamodules import caption_datamodule, speech_datamodule, text_datamodule

MODALITIES = ("text", "images", "audio")
WORDS = "one two three four five six seven eight nine ten".split()


class Counting:
    """A source that counts how often it is read (its splits, its images) and yields one bad item in training."""

    def __init__(self, source) -> None:
        self.source = source
        self.reads = 0

    def settings(self) -> dict:
        return self.source.settings() if hasattr(self.source, "settings") else {"name": "pairs"}

    def splits(self) -> dict:
        self.reads += 1
        splits = {name: list(items) for name, items in self.source.splits().items()}
        splits["train"].insert(1, Skipped("corpus.txt:2", "empty line", "line 2 of corpus.txt is empty"))
        return splits

    def load_image(self, record):
        self.reads += 1
        return self.source.load_image(record)


class Pairs:
    """Sentence pairs: the target is the source's words backwards, one of them longer than the rest."""

    def splits(self) -> dict:
        rng = np.random.default_rng(0)

        def pairs(count: int) -> list[tuple[str, str]]:
            out = []
            for i in range(count):
                words = list(rng.choice(WORDS, size=2 + i % 4))
                out.append((" ".join(words), " ".join(reversed(words + (["ten"] * 8 if i == 3 else [])))))
            return out

        return {"train": pairs(24), "val": pairs(7), "test": pairs(5)}


def write_audio(folder: Path, name: str, count: int) -> str:
    """``count`` WAV files of tones and a JSON-lines manifest of them, with number-word transcripts (written
    once: a file written again is a changed file, with stores of its own)."""
    if (folder / f"{name}.jsonl").is_file():
        return str(folder / f"{name}.jsonl")
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(count):
        seconds = 0.3 + 0.1 * (i % 5)
        t = np.arange(int(seconds * 16000)) / 16000
        sf.write(folder / f"{name}{i}.wav", (0.3 * np.sin(2 * np.pi * (200 + 40 * i) * t)).astype(np.float32), 16000)
        text = " ".join(WORDS[i % 10 : i % 10 + 1 + i % 3]) + (" nine" * 8 if i == 3 and name == "train" else "")
        lines.append(json.dumps({"audio_filepath": f"{name}{i}.wav", "text": text, "duration": seconds}))
    (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(folder / f"{name}.jsonl")


def build(modality: str, tmp_path: Path, cache: str = "cache", **options) -> DataModule:
    """A fresh data module (and source) of a modality over the same data and cache folder."""
    options = {"cache_dir": str(tmp_path / cache), "max_skip_fraction": 0.5, "batch_size": 4, "eval_batch_size": 3,
               **options}
    if modality == "text":
        return text_datamodule(Counting(Pairs()), **options)
    if modality == "images":
        scenes = ShapeScenes(n_train=16, n_val=5, n_test=4, image_size=32, seed=3)
        return caption_datamodule(Counting(scenes), **options)
    audio = tmp_path / "audio"
    manifest = JsonlManifest(train=write_audio(audio, "train", 12), val=write_audio(audio, "val", 4),
                             test=write_audio(audio, "test", 3))
    return speech_datamodule(Counting(manifest), tokenizer=CharTokenizer(), **options)


def started(modality: str, cache_dir: Path):
    """A data module of the contract suite's data (text in several shards a split), set up from ``cache_dir``."""
    dm = build(modality, cache_dir.parent, cache=cache_dir.name, shard_size=8 if modality == "text" else 2048)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def store_files(cache_dir: Path, name: str) -> list[Path]:
    """``name`` ("manifest.json", or "shard" for every shard file) in every example store under ``cache_dir``."""
    pattern = "shard-*.arrow" if name == "shard" else name
    return sorted((cache_dir / "store").glob(f"*/{pattern}"))
