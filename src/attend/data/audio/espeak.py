"""English speech synthesized with espeak-ng (number words or short Ding sentences), generated once into a cache."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from attend.data.audio.number_words import number_words
from attend.data.audio.record import SpeechDataError, Utterance, audio_duration, normalize_transcript
from attend.data.cache import load_or_rebuild, write_json_atomic
from attend.data.splitting import SPLITS
from attend.data.text.ding import DING_PATH, DingNotFoundError
from attend.data.text.ding_format import parse_ding

log = logging.getLogger("attend.data")

ESPEAK = "espeak-ng"
GENERATOR_VERSION = 1  # bump when generation changes, so old caches are rebuilt
# espeak-ng variants (`espeak-ng --voices=variant`, File column without "!v/"): natural-sounding ones only,
# no whisper, croak, Demonic or robot voices. Test variants are never heard in training.
TRAIN_VARIANTS = (
    "m1 m2 m3 m4 m5 m6 m7 f1 f2 f3 f4 klatt klatt2 klatt3 adam david john linda max paul robert steph "
    "benjamin norbert iven quincy travis"
).split()
VAL_VARIANTS = "klatt5 belinda edward victor".split()
TEST_VARIANTS = "m8 f5 klatt4 steph2 Andy caleb".split()
DING_WORDS = 8  # longest Ding sentence kept, in words
SPEAKABLE = re.compile(r"^[A-Za-z][A-Za-z' ,.?!\u2019-]*$")  # no digits or symbols the transcript would not match


class EspeakNotInstalledError(FileNotFoundError):
    """The espeak-ng program is not on PATH."""

    def __init__(self) -> None:
        super().__init__("espeak-ng is not installed: apt-get install espeak-ng (or `make install` as root)")


@dataclass(frozen=True)
class Job:
    """One utterance to synthesize: where, what and how."""

    key: str
    file: str  # relative to the cache folder
    text: str  # as spoken; the transcript is its normalized form
    speaker: str  # "voice+variant", e.g. "en-us+m3"
    speed: int  # words per minute
    pitch: int  # 0..99


class EspeakSpeech:
    """Seeded utterances spoken by espeak-ng with random voice, variant, speed and pitch, cached as WAV files under
    ``cache_dir/espeak_en/<hash of settings()>/``: ``text="numbers"``, the words of distinct integers 0..99,999;
    ``"ding"``, distinct English Ding sentences of at most 8 words. Texts never repeat across splits."""

    def __init__(self, cache_dir: str | os.PathLike, n_train: int = 1600, n_val: int = 150, n_test: int = 250,
                 text: str = "numbers", voices: Sequence[str] = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp"),
                 train_variants: Sequence[str] = TRAIN_VARIANTS, val_variants: Sequence[str] = VAL_VARIANTS,
                 test_variants: Sequence[str] = TEST_VARIANTS, speed: Sequence[int] = (130, 200),
                 pitch: Sequence[int] = (30, 70), seed: int = 1234, workers: int = 2,
                 ding_path: str | os.PathLike = DING_PATH) -> None:
        if text not in ("numbers", "ding"):
            raise ValueError(f"text must be 'numbers' or 'ding', not {text!r}")
        self.cache_dir = Path(cache_dir)
        self.counts = {"train": n_train, "val": n_val, "test": n_test}
        self.text = text
        self.voices = [str(v) for v in voices]  # plain lists: Hydra passes ListConfig
        self.variants = {"train": list(train_variants), "val": list(val_variants), "test": list(test_variants)}
        self.speed = (int(speed[0]), int(speed[1]))
        self.pitch = (int(pitch[0]), int(pitch[1]))
        self.seed = seed
        self.workers = workers
        self.ding_path = Path(ding_path)
        _check_disjoint(self.variants)

    def settings(self) -> dict:
        """Everything that changes the audio: the cache key."""
        settings = {"version": GENERATOR_VERSION, "counts": self.counts, "text": self.text, "voices": self.voices,
                    "variants": self.variants, "speed": list(self.speed), "pitch": list(self.pitch), "seed": self.seed}
        if self.text == "ding":
            settings["ding_path"] = str(self.ding_path)
        return settings

    def folder(self) -> Path:
        """Where this configuration's WAV files and manifest live."""
        key = hashlib.sha256(json.dumps(self.settings(), sort_keys=True).encode()).hexdigest()[:16]
        return self.cache_dir / "espeak_en" / key

    def splits(self) -> dict[str, list[Utterance]]:
        """{"train", "val", "test"} -> utterances, synthesized first when the cache is missing or damaged."""
        path = self.folder() / "manifest.json"
        manifest = load_or_rebuild(path, read_manifest, self.generate, lambda data, path: write_json_atomic(path, data))
        return manifest_utterances(manifest, path.parent)

    def generate(self) -> dict:
        """Synthesize every utterance (``workers`` espeak-ng processes at once); the manifest ``splits`` writes."""
        version = espeak_version()
        _check_installed_variants([v for variants in self.variants.values() for v in variants])
        plan = self.plan()
        folder = self.folder()
        for split in SPLITS:
            (folder / split).mkdir(parents=True, exist_ok=True)
        jobs = [job for split in SPLITS for job in plan[split]]
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            durations = dict(zip((j.key for j in jobs), pool.map(lambda j: synthesize(j, folder), jobs), strict=True))
        log.info("espeak-ng %s: %d utterances in %.1f s into %s", version, len(jobs), time.perf_counter() - start,
                 folder)
        splits = {split: [{**asdict(j), "text": normalize_transcript(j.text), "spoken": j.text,
                           "duration": durations[j.key]} for j in plan[split]] for split in SPLITS}
        return {"settings": self.settings(), "espeak_version": version, "splits": splits}

    def plan(self) -> dict[str, list[Job]]:
        """The utterances to synthesize, all drawn from random.Random(seed): texts, then each one's voice."""
        rng = random.Random(self.seed)
        texts = iter(self._texts(rng, sum(self.counts.values())))
        return {split: [Job(key=f"espeak/{split}/{i:05d}", file=f"{split}/{i:05d}.wav", text=next(texts),
                            speaker=f"{rng.choice(self.voices)}+{rng.choice(self.variants[split])}",
                            speed=rng.randint(*self.speed), pitch=rng.randint(*self.pitch))
                        for i in range(self.counts[split])] for split in SPLITS}

    def _texts(self, rng: random.Random, count: int) -> list[str]:
        """``count`` distinct texts to speak."""
        if self.text == "numbers":
            if count > 100_000:
                raise ValueError(f"only 100000 distinct numbers 0..99999 exist; {count} utterances asked for")
            return [number_words(n) for n in rng.sample(range(100_000), count)]
        sentences = ding_sentences(self.ding_path)
        if count > len(sentences):
            raise SpeechDataError(f"{self.ding_path} has only {len(sentences)} English sentences of <= {DING_WORDS} "
                                  f"words, {count} utterances asked for: lower data.source.n_train / n_val / n_test")
        return rng.sample(sentences, count)


def synthesize(job: Job, folder: Path) -> float:
    """Write ``job``'s WAV file with espeak-ng; its duration in seconds."""
    path = folder / job.file
    command = [ESPEAK, "-v", job.speaker, "-s", str(job.speed), "-p", str(job.pitch), "-w", str(path), job.text]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not path.is_file():
        raise RuntimeError(f"espeak-ng failed on {job.key} ({' '.join(command)}): "
                           f"{done.stderr.strip() or done.returncode}; check the voice names with "
                           "`espeak-ng --voices=en`")
    return audio_duration(path)


def espeak_version() -> str:
    """The version of the espeak-ng on PATH, e.g. "1.51"."""
    if shutil.which(ESPEAK) is None:
        raise EspeakNotInstalledError()
    out = subprocess.run([ESPEAK, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"text-to-speech:\s*(\S+)", out)
    return found.group(1) if found else out.strip()


def installed_variants() -> set[str]:
    """Names usable after "+" in a voice (the File column of `espeak-ng --voices=variant`, without "!v/")."""
    out = subprocess.run([ESPEAK, "--voices=variant"], capture_output=True, text=True, check=True).stdout
    return {m.group(1) for m in re.finditer(r"!v/(.+?)(?:\s{2,}|\s*$)", out, flags=re.MULTILINE)}


def ding_sentences(path: Path) -> list[str]:
    """Sorted distinct English sentences of the Ding dictionary with <= 8 words and nothing spoken differently."""
    if not path.is_file():
        raise DingNotFoundError(path)
    with open(path, encoding="utf-8") as f:
        english = {en for _, en in parse_ding(f).sentences}
    return sorted(s for s in english if len(s.split()) <= DING_WORDS and SPEAKABLE.match(s))


def _check_disjoint(variants: dict[str, list[str]]) -> None:
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        if shared := sorted(set(variants[a]) & set(variants[b])):
            raise ValueError(f"{a}_variants and {b}_variants share {shared}: held-out splits must use unheard voice "
                             "variants")


def _check_installed_variants(variants: list[str]) -> None:
    """espeak-ng silently falls back to its default voice for an unknown variant: refuse one up front."""
    if unknown := sorted(set(variants) - installed_variants()):
        raise ValueError(f"espeak-ng has no voice variant {unknown}: pick names from the File column of "
                         "`espeak-ng --voices=variant` (without the leading '!v/')")


def manifest_utterances(manifest: dict, folder: Path) -> dict[str, list[Utterance]]:
    """{"train", "val", "test"} -> utterances of a manifest whose WAV files are in ``folder``."""
    return {split: [Utterance(e["key"], str(folder / e["file"]), e["text"], e["duration"], e["speaker"])
                    for e in manifest["splits"][split]] for split in SPLITS}


def read_manifest(path: Path) -> dict:
    """A cached manifest; a truncated or damaged one (JSON, UTF-8, a missing split or field) raises."""
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    manifest_utterances(manifest, path.parent)  # every split and field there
    return manifest
