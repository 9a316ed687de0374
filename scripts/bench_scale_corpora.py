"""Synthetic corpora in the real on-disk formats, for scripts/bench_scale.py (seeded, cached, reused).

    text    data=parallel_text   {root}/{train,val,test}.{de,en}, one sentence a line
    images  data=karpathy        {root}/dataset_coco.json + {root}/images/{train,val,test}/NNNNNNN.jpg
    audio   data=librispeech     {root}/{train-clean-100,dev-clean,test-clean}/SPEAKER/CHAPTER/*.flac + .trans.txt

Each corpus lives in its own folder under the cache root, named after its sizes and the generator
version; a ``.done`` file written last marks it complete, and a folder without it is rebuilt.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from multiprocessing import get_context
from pathlib import Path

import numpy as np

VERSION = 1  # bump when a generator changes: old corpora are then not reused
DONE = ".done"
SEED = 20261205

# the fixed vocabularies: pseudo-words from syllables; the English side is a word map of the German side
SYLLABLES_DE = ["ka", "li", "mo", "ne", "ru", "sta", "ber", "ga", "ho", "schi", "tu", "wei", "zen", "dor", "fa", "lu"]
SYLLABLES_EN = ["ta", "ro", "mi", "ke", "pa", "lo", "dan", "su", "vi", "ther", "bo", "ny", "cal", "fe", "gu", "win"]
TEXT_VOCAB = 3000

COLORS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (50, 80, 220), "yellow": (230, 210, 40),
          "purple": (140, 60, 170), "orange": (240, 140, 30), "black": (20, 20, 20), "white": (245, 245, 245)}
SHAPES = ("circle", "square", "triangle")
IMAGE_WIDTH, IMAGE_HEIGHT = 96, 72

SAMPLE_RATE = 16000
WORDS_AUDIO = ["ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE", "YES", "NO",
               "UP", "DOWN", "LEFT", "RIGHT", "ON", "OFF", "STOP", "GO"]
SPEAKERS = (19, 26, 27, 32, 39, 40, 60, 78, 83, 87)


def corpus_dir(root: Path, modality: str, size: int, val: int, test: int) -> Path:
    return Path(root) / modality / f"n{size}-val{val}-test{test}-v{VERSION}"


def ensure(root: Path, modality: str, size: int, val: int, test: int, workers: int = 1) -> tuple[Path, float]:
    """The corpus folder (built when missing or incomplete) and the seconds building it took (0: reused)."""
    import time

    folder = corpus_dir(root, modality, size, val, test)
    if (folder / DONE).is_file():
        return folder, 0.0
    if folder.exists():
        shutil.rmtree(folder)
    start = time.perf_counter()
    tmp = folder.with_name(folder.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    GENERATORS[modality](tmp, {"train": size, "val": val, "test": test}, workers)
    tmp.rename(folder)
    (folder / DONE).write_text(json.dumps({"size": size, "val": val, "test": test, "version": VERSION}))
    return folder, time.perf_counter() - start


def paths_for(modality: str, folder: Path) -> dict[str, str]:
    """What the data config points at: parallel_text's root, karpathy's path and image_root, librispeech's root."""
    if modality == "text":
        return {"root": str(folder)}
    if modality == "images":
        return {"path": str(folder / "dataset_coco.json"), "image_root": str(folder / "images")}
    return {"root": str(folder)}


def _pool_map(function: Callable, jobs: Iterable, workers: int) -> list:
    if workers <= 1:
        return [function(job) for job in jobs]
    with get_context("fork").Pool(workers) as pool:
        return list(pool.imap(function, jobs, chunksize=1))


# text ------------------------------------------------------------------------------------------------
def _words(syllables: list[str], count: int, rng: np.random.Generator) -> list[str]:
    seen: set[str] = set()
    words: list[str] = []
    while len(words) < count:
        word = "".join(rng.choice(syllables, size=int(rng.integers(1, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def write_text(folder: Path, sizes: dict[str, int], workers: int = 1) -> None:
    rng = np.random.default_rng(SEED)
    de = np.array(_words(SYLLABLES_DE, TEXT_VOCAB, rng), dtype=object)
    en = np.array(_words(SYLLABLES_EN, TEXT_VOCAB, rng), dtype=object)[rng.permutation(TEXT_VOCAB)]
    frequency = 1.0 / (np.arange(TEXT_VOCAB) + 10.0)  # Zipf-like: a few words common, most rare
    frequency /= frequency.sum()
    for split_index, (split, count) in enumerate(sizes.items()):
        split_rng = np.random.default_rng([SEED, split_index])
        with open(folder / f"{split}.de", "w", encoding="utf-8") as f_de, \
                open(folder / f"{split}.en", "w", encoding="utf-8") as f_en:
            for start in range(0, count, 100_000):
                n = min(100_000, count - start)
                lengths = split_rng.integers(5, 31, size=n)
                ids = split_rng.choice(TEXT_VOCAB, size=int(lengths.sum()), p=frequency)
                ends = np.cumsum(lengths)
                de_words, en_words = de[ids], en[ids]
                f_de.write("".join(" ".join(de_words[e - k:e]) + "\n" for e, k in zip(ends, lengths, strict=True)))
                f_en.write("".join(" ".join(en_words[e - k:e]) + "\n" for e, k in zip(ends, lengths, strict=True)))


# images ----------------------------------------------------------------------------------------------
def _scene(index: int, split_index: int) -> tuple[str, list[tuple[str, str, tuple[int, int, int, int]]]]:
    rng = np.random.default_rng([SEED, 1, split_index, index])
    names = list(COLORS)
    background = names[int(rng.integers(len(names)))]
    shapes = []
    for _ in range(int(rng.integers(1, 3))):
        color = names[int(rng.integers(len(names)))]
        while color == background:
            color = names[int(rng.integers(len(names)))]
        size = int(rng.integers(16, 34))
        x, y = int(rng.integers(0, IMAGE_WIDTH - size)), int(rng.integers(0, IMAGE_HEIGHT - size))
        shapes.append((color, SHAPES[int(rng.integers(len(SHAPES)))], (x, y, x + size, y + size)))
    return background, shapes


def _captions(background: str, shapes: list) -> list[str]:
    things = " and ".join(f"a {color} {shape}" for color, shape, _ in shapes)
    first_color, first_shape, box = shapes[0]
    side = "left" if box[0] < IMAGE_WIDTH / 2 else "right"
    return [
        f"{things} on a {background} background",
        f"there is {things}",
        f"a picture of {things}",
        f"a {first_color} {first_shape} on the {side}",
        f"{things} in front of {background}",
    ]


def _draw(job: tuple[Path, int, int]) -> None:
    from PIL import Image, ImageDraw

    path, index, split_index = job
    background, shapes = _scene(index, split_index)
    image = Image.new("RGB", (IMAGE_WIDTH, IMAGE_HEIGHT), COLORS[background])
    draw = ImageDraw.Draw(image)
    for color, shape, (x0, y0, x1, y1) in shapes:
        if shape == "circle":
            draw.ellipse((x0, y0, x1, y1), fill=COLORS[color])
        elif shape == "square":
            draw.rectangle((x0, y0, x1, y1), fill=COLORS[color])
        else:
            draw.polygon([((x0 + x1) // 2, y0), (x0, y1), (x1, y1)], fill=COLORS[color])
    image.save(path, quality=85)


def _draw_chunk(jobs: list[tuple[Path, int, int]]) -> None:
    for job in jobs:
        _draw(job)


def write_images(folder: Path, sizes: dict[str, int], workers: int = 1) -> None:
    images, jobs, image_id = [], [], 0
    for split_index, (split, count) in enumerate(sizes.items()):
        (folder / "images" / split).mkdir(parents=True)
        for index in range(count):
            filename = f"{index:07d}.jpg"
            background, shapes = _scene(index, split_index)
            sentences = [{"raw": caption, "tokens": caption.split()} for caption in _captions(background, shapes)]
            images.append({"filepath": split, "filename": filename, "imgid": image_id, "split": split,
                           "sentences": sentences, "cocoid": image_id})
            jobs.append((folder / "images" / split / filename, index, split_index))
            image_id += 1
    chunks = [jobs[i:i + 500] for i in range(0, len(jobs), 500)]
    _pool_map(_draw_chunk, chunks, workers)
    with open(folder / "dataset_coco.json", "w", encoding="utf-8") as f:
        json.dump({"images": images, "dataset": "coco"}, f)


# audio -----------------------------------------------------------------------------------------------
def _utterance(index: int, split_index: int) -> tuple[str, np.ndarray]:
    """1-3 s: one tone a word (its pitch names the word) with short gaps, over low noise."""
    rng = np.random.default_rng([SEED, 2, split_index, index])
    seconds = float(rng.uniform(1.0, 3.0))
    total = int(seconds * SAMPLE_RATE)
    n_words = max(1, int(seconds * 2))
    words = rng.integers(len(WORDS_AUDIO), size=n_words)
    audio = rng.normal(0.0, 0.01, size=total)
    span = total // n_words
    t = np.arange(span) / SAMPLE_RATE
    for k, word in enumerate(words):
        frequency = 200.0 + 60.0 * int(word)
        tone = 0.3 * np.sin(2 * np.pi * frequency * t) * np.hanning(span)
        audio[k * span:(k + 1) * span] += tone
    return " ".join(WORDS_AUDIO[int(w)] for w in words), audio.astype(np.float32)


def _write_chapter(job: tuple[Path, str, list[tuple[int, int, int]]]) -> None:
    import soundfile

    chapter_dir, chapter_id, utterances = job
    chapter_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for utt, index, split_index in utterances:
        text, audio = _utterance(index, split_index)
        key = f"{chapter_id}-{utt:04d}"
        soundfile.write(chapter_dir / f"{key}.flac", audio, SAMPLE_RATE, format="FLAC")
        lines.append(f"{key} {text}\n")
    (chapter_dir / f"{chapter_id}.trans.txt").write_text("".join(lines), encoding="utf-8")


def write_audio(folder: Path, sizes: dict[str, int], workers: int = 1) -> None:
    subsets = {"train": "train-clean-100", "val": "dev-clean", "test": "test-clean"}
    jobs = []
    for split_index, (split, count) in enumerate(sizes.items()):
        per_chapter = 100
        for chapter_number, start in enumerate(range(0, count, per_chapter)):
            speaker = SPEAKERS[chapter_number % len(SPEAKERS)] + 1000 * split_index
            chapter = 100 + chapter_number
            chapter_id = f"{speaker}-{chapter}"
            utterances = [(i - start, i, split_index) for i in range(start, min(count, start + per_chapter))]
            jobs.append((folder / subsets[split] / str(speaker) / str(chapter), chapter_id, utterances))
    _pool_map(_write_chapter, jobs, workers)


GENERATORS: dict[str, Callable[[Path, dict[str, int], int], None]] = {
    "text": write_text, "images": write_images, "audio": write_audio,
}
