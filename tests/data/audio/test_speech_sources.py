"""Speech sources: audio reading, transcripts, number words, espeak-ng synthesis, Tux Paint, LibriSpeech, manifests."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from attend.data.audio import (
    AudioReadError,
    EspeakNotInstalledError,
    EspeakSpeech,
    JsonlManifest,
    LibriSpeech,
    SpeechDataError,
    TuxPaintSpeech,
    audio_duration,
    normalize_transcript,
    number_words,
    read_audio,
)
from attend.data.audio import espeak as espeak_module
from attend.data.bad_samples import Skipped
from tests.helpers.audio import HAS_ESPEAK, tiny_espeak

TUXPAINT = Path("/usr/share/tuxpaint/stamps")


def tone(seconds: float, rate: int, channels: int = 1, level: float = 0.5) -> np.ndarray:
    """A 440 Hz sine, (samples, channels)."""
    t = np.arange(int(seconds * rate)) / rate
    wave = (level * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    return np.repeat(wave[:, None], channels, axis=1)


# --- read_audio, audio_duration ---


@pytest.mark.parametrize(("suffix", "fmt"), [(".wav", "WAV"), (".flac", "FLAC"), (".ogg", "OGG")])
def test_read_audio_formats(tmp_path, suffix, fmt):
    path = tmp_path / f"a{suffix}"
    soundfile.write(path, tone(0.5, 16000), 16000, format=fmt)
    wave = read_audio(path)
    assert wave.dtype == torch.float32 and wave.dim() == 1
    assert abs(wave.numel() - 8000) <= 1  # Vorbis may pad a frame
    assert wave.abs().max() <= 1.0
    assert audio_duration(path) == pytest.approx(0.5, abs=1e-3)


def test_read_audio_downmixes_stereo(tmp_path):
    path = tmp_path / "stereo.wav"
    left_right = np.stack([np.full(1600, 0.2), np.full(1600, 0.6)], axis=1).astype(np.float32)  # (samples, 2)
    soundfile.write(path, left_right, 16000, subtype="FLOAT")
    wave = read_audio(path)
    assert wave.shape == (1600,)
    assert torch.allclose(wave, torch.full((1600,), 0.4), atol=1e-6)


def test_read_audio_resamples(tmp_path):
    path = tmp_path / "espeak_rate.wav"
    soundfile.write(path, tone(1.0, 22050), 22050)  # espeak-ng's rate
    assert read_audio(path, sample_rate=16000).shape == (16000,)
    assert read_audio(path, sample_rate=22050).shape == (22050,)


def test_read_audio_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.wav"
    with pytest.raises(AudioReadError, match="missing.wav.*does not exist"):
        read_audio(missing)
    corrupt = tmp_path / "corrupt.flac"
    corrupt.write_bytes(b"not audio at all" * 10)
    with pytest.raises(AudioReadError, match="corrupt.flac.*cannot be read"):
        read_audio(corrupt)
    with pytest.raises(AudioReadError, match="corrupt.flac"):
        audio_duration(corrupt)
    empty = tmp_path / "empty.wav"
    soundfile.write(empty, np.zeros((0, 1), dtype=np.float32), 16000)
    with pytest.raises(AudioReadError, match="empty.wav.*no samples"):
        read_audio(empty)


# --- normalize_transcript, number_words ---


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("HELLO, World!", "hello world"),
        ("Une pièce de 25 cents (0,25 $), appelée “quarter”.", "une pièce de 25 cents 0 25 appelée quarter"),
        ("L’éléphant DON'T 'quoted' rock'n'roll", "l'éléphant don't quoted rock'n'roll"),
        ("Cafe\u0301  demi-dollar\t\n", "café demi dollar"),  # decomposed é composed (NFC)
        ("Москва — ГОРОД", "москва город"),
        ("  ", ""),
    ],
)
def test_normalize_transcript(raw, normalized):
    assert normalize_transcript(raw) == normalized


def test_number_words():
    assert number_words(0) == "zero"
    assert number_words(13) == "thirteen"
    assert number_words(21) == "twenty one"
    assert number_words(100) == "one hundred"
    assert number_words(4207) == "four thousand two hundred seven"
    assert number_words(10_010) == "ten thousand ten"
    assert number_words(999_999) == "nine hundred ninety nine thousand nine hundred ninety nine"
    with pytest.raises(ValueError):
        number_words(1_000_000)


# --- EspeakSpeech ---


@pytest.mark.skipif(not HAS_ESPEAK, reason="espeak-ng is not installed")
def test_espeak_generates_then_reuses(tmp_path, monkeypatch):
    source = tiny_espeak(tmp_path)
    splits = source.splits()
    assert {name: len(us) for name, us in splits.items()} == {"train": 6, "val": 2, "test": 2}
    for u in splits["train"] + splits["val"] + splits["test"]:
        assert Path(u.path).is_file() and u.duration > 0.3
        assert u.text == normalize_transcript(u.text) and u.text
        assert u.speaker.split("+")[0] in source.voices
    assert {u.speaker.split("+")[1] for u in splits["test"]} <= set(source.variants["test"])
    assert read_audio(splits["val"][0].path).numel() == pytest.approx(splits["val"][0].duration * 16000, abs=2)
    manifest = source.folder() / "manifest.json"
    assert manifest.parent.parent.name == "espeak_en" and json.loads(manifest.read_text())["espeak_version"]

    def no_espeak(*args, **kwargs):
        raise AssertionError("the cache should have been reused")

    monkeypatch.setattr(espeak_module.subprocess, "run", no_espeak)
    assert tiny_espeak(tmp_path).splits() == splits


@pytest.mark.skipif(not HAS_ESPEAK, reason="espeak-ng is not installed")
def test_espeak_regenerates_without_manifest(tmp_path):
    source = tiny_espeak(tmp_path)
    first = source.splits()
    (source.folder() / "manifest.json").unlink()  # an interrupted generation: files but no manifest
    Path(first["train"][0].path).unlink()
    assert source.splits() == first
    assert Path(first["train"][0].path).is_file()


def test_espeak_plan_is_seeded_and_variants_disjoint(tmp_path):
    a, b = tiny_espeak(tmp_path / "a"), tiny_espeak(tmp_path / "b")
    assert a.plan() == b.plan()  # same seed, same texts, voices, speeds, pitches
    assert a.plan() != tiny_espeak(tmp_path, seed=99).plan()
    assert a.folder().name != tiny_espeak(tmp_path, seed=99).folder().name
    plan = a.plan()
    texts = [job.text for split in plan.values() for job in split]
    assert len(set(texts)) == len(texts)  # no text in two splits
    variants = {split: {job.speaker.split("+")[1] for job in jobs} for split, jobs in plan.items()}
    assert not variants["test"] & set(a.variants["train"]) and not variants["val"] & set(a.variants["train"])
    assert set(a.variants["train"]).isdisjoint(a.variants["test"])
    assert all(130 <= job.speed <= 200 and 30 <= job.pitch <= 70 for jobs in plan.values() for job in jobs)
    json.dumps(a.settings())
    with pytest.raises(ValueError, match="share.*m1"):
        tiny_espeak(tmp_path, test_variants=["m1", "f5"])


@pytest.mark.skipif(not HAS_ESPEAK, reason="espeak-ng is not installed")
def test_espeak_refuses_unknown_variant(tmp_path):
    with pytest.raises(ValueError, match="no voice variant.*nosuchvoice"):
        tiny_espeak(tmp_path, test_variants=["nosuchvoice"]).splits()


def test_espeak_not_installed(tmp_path, monkeypatch):
    monkeypatch.setattr(espeak_module.shutil, "which", lambda name: None)
    with pytest.raises(EspeakNotInstalledError, match="apt-get install espeak-ng"):
        tiny_espeak(tmp_path).splits()


def test_espeak_ding_sentences(tmp_path):
    ding = tmp_path / "de-en"
    lines = [f"Das ist Satz {i}. :: This is sentence {number_words(i)}." for i in range(20)]
    lines += ["Ein Satz mit Zahl 3. :: A sentence with 3 in it.", "Viel zu lang ist das hier. :: " + "word " * 9 + "."]
    ding.write_text("# comment\n" + "\n".join(lines) + "\n", encoding="utf-8")
    plan = tiny_espeak(tmp_path, text="ding", ding_path=ding).plan()
    texts = [job.text for jobs in plan.values() for job in jobs]
    assert len(set(texts)) == 10 and all(t.startswith("This is sentence") for t in texts)
    with pytest.raises(SpeechDataError, match="only 20 English sentences"):
        EspeakSpeech(tmp_path, n_train=30, text="ding", ding_path=ding).plan()


# --- TuxPaintSpeech ---


def write_stamp(folder: Path, name: str, lines: list[str], recordings: tuple[str, ...] = ("fr",)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for lang in recordings:
        stereo_44k = tone(0.3, 44100, channels=2)  # the real recordings are 44.1 kHz stereo Vorbis
        soundfile.write(folder / f"{name}_desc_{lang}.ogg", stereo_44k, 44100, format="OGG", subtype="VORBIS")


@pytest.fixture
def stamps(tmp_path) -> Path:
    root = tmp_path / "stamps"
    write_stamp(root / "animals", "cat", ["A cat.", "de.utf8=Eine Katze.", "fr.utf8=Un chat « tigré »."])
    write_stamp(root / "animals", "dog", ["A dog.", "fr.utf8=Un chien.", "fr_CA.utf8=Un pitou."], ("fr", "ru"))
    write_stamp(root / "food", "apple", ["An apple.", "fr.utf8=Une pomme (rouge)."])
    write_stamp(root / "food", "pear", ["A pear.", "de.utf8=Eine Birne."])  # no French line: skipped
    return root


def test_tuxpaint_speech(stamps, caplog):
    source = TuxPaintSpeech(stamps, n_val=1, n_test=1)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        splits = source.splits()
    assert source.skipped == 1 and "skipped 1 of 4" in caplog.text and "pear_desc_fr.ogg" in caplog.text
    everything = {u.key: u for split in splits.values() for u in split}
    assert sorted(everything) == ["animals/cat_desc_fr", "animals/dog_desc_fr", "food/apple_desc_fr"]
    assert [len(splits[s]) for s in ("train", "val", "test")] == [1, 1, 1]
    assert everything["animals/cat_desc_fr"].text == "un chat tigré"
    assert everything["food/apple_desc_fr"].text == "une pomme rouge"
    assert read_audio(everything["animals/dog_desc_fr"].path).shape == (4800,)  # 0.3 s at 16 kHz, mono
    assert TuxPaintSpeech(stamps, n_val=1, n_test=1).splits() == splits  # deterministic


def test_tuxpaint_speech_errors(stamps, tmp_path):
    with pytest.raises(SpeechDataError, match="tuxpaint-stamps-default"):
        TuxPaintSpeech(tmp_path / "nowhere").splits()
    with pytest.raises(SpeechDataError, match=r"languages with recordings there: fr, ru"):
        TuxPaintSpeech(stamps, language="de").splits()
    with pytest.raises(SpeechDataError, match="leaves none to train on"):
        TuxPaintSpeech(stamps, n_val=2, n_test=1).splits()


@pytest.mark.skipif(not TUXPAINT.is_dir(), reason="tuxpaint-stamps-default is not installed")
def test_tuxpaint_speech_real_french():
    splits = TuxPaintSpeech().splits()
    assert sum(len(us) for us in splits.values()) > 800
    assert len(splits["val"]) == 100 and len(splits["test"]) == 120


# --- LibriSpeech ---


def write_chapter(subset: Path, speaker: str, chapter: str, texts: list[str], missing: int | None = None) -> Path:
    folder = subset / speaker / chapter
    folder.mkdir(parents=True)
    lines = []
    for i, text in enumerate(texts):
        key = f"{speaker}-{chapter}-{i:04d}"
        lines.append(f"{key} {text}")
        if i != missing:
            soundfile.write(folder / f"{key}.flac", tone(0.2, 16000), 16000, format="FLAC")
    transcript = folder / f"{speaker}-{chapter}.trans.txt"
    transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return transcript


@pytest.fixture
def librispeech(tmp_path) -> Path:
    root = tmp_path / "LibriSpeech"
    write_chapter(root / "train-clean-100", "19", "198", ["NORTHANGER ABBEY", "CHAPTER ONE"])
    write_chapter(root / "train-clean-100", "26", "495", ["THE GIRL'S DOG RAN"])
    write_chapter(root / "dev-clean", "84", "121123", ["GO DO YOU HEAR"])
    write_chapter(root / "test-clean", "1089", "134686", ["HE HOPED THERE WOULD BE STEW FOR DINNER"])
    return root


def test_librispeech(librispeech):
    splits = LibriSpeech(librispeech).splits()
    assert [u.key for u in splits["train"]] == ["19-198-0000", "19-198-0001", "26-495-0000"]
    assert [u.speaker for u in splits["train"]] == ["19", "19", "26"]
    assert splits["train"][2].text == "the girl's dog ran"
    assert splits["val"][0].key == "84-121123-0000" and splits["test"][0].speaker == "1089"
    assert read_audio(splits["test"][0].path).shape == (3200,)
    both = LibriSpeech(librispeech, train=["train-clean-100", "dev-clean"]).splits()["train"]
    assert len(both) == 4


def test_librispeech_errors(librispeech):
    with pytest.raises(SpeechDataError, match=r"train-other-500 does not exist.*openslr.org/12.*data.source.root"):
        LibriSpeech(librispeech, train=["train-other-500"]).splits()
    with pytest.raises(SpeechDataError, match="set data.source.root=.*LibriSpeech"):
        LibriSpeech(librispeech.parent).splits()
    transcript = write_chapter(librispeech / "dev-other", "7", "8", ["ONE", "TWO", "THREE"], missing=1)
    transcript.write_bytes(transcript.read_bytes() + "7-8-0003 F\xdcNF\n".encode("latin-1"))
    source = LibriSpeech(librispeech, val=["dev-other"])
    one, missing, three, undecodable = source.splits()["val"]  # a Skipped item in place of each bad line
    assert (one.key, three.key) == ("7-8-0000", "7-8-0002") and not hasattr(source, "bad_samples")
    flac = transcript.parent / "7-8-0001.flac"
    assert missing == Skipped(f"{transcript}:2", "missing file",
                              f"audio {flac} is missing; re-extract the subset or delete this line")
    assert undecodable == Skipped(f"{transcript}:4", "invalid UTF-8", "line 4 is not valid UTF-8 (invalid "
                                  "continuation byte); re-extract the subset or fix the line")
    transcript.write_text("7-8-0000 ONE\nBROKEN LINE\n", encoding="utf-8")
    with pytest.raises(SpeechDataError, match=rf"{transcript.name}:2: expected `7-8-UTT TRANSCRIPT`"):
        LibriSpeech(librispeech, val=["dev-other"]).splits()


# --- JsonlManifest ---


def test_jsonl_manifest(tmp_path):
    (tmp_path / "audio").mkdir()
    soundfile.write(tmp_path / "audio" / "a.wav", tone(0.25, 16000), 16000)
    absolute = tmp_path / "b.flac"
    soundfile.write(absolute, tone(0.5, 8000), 8000, format="FLAC")
    train = tmp_path / "train.jsonl"
    lines = [
        {"audio_filepath": "audio/a.wav", "text": "Hello, World!", "duration": 0.25, "speaker": "s1"},
        {"audio_filepath": str(absolute), "text": "second one", "duration": 1},
    ]
    train.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    splits = JsonlManifest(train, train, train).splits()
    a, b = splits["train"]
    assert a.path == str(tmp_path / "audio" / "a.wav") and a.text == "hello world" and a.speaker == "s1"
    assert b.path == str(absolute) and b.duration == 1.0 and b.speaker == ""
    assert read_audio(a.path).shape == (4000,) and read_audio(b.path).shape == (8000,)
    assert splits["test"] == splits["train"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "bad.jsonl:2: not valid JSON"),
        ('{"audio_filepath": "a.wav", "text": "x"}', r"bad.jsonl:2: missing key\(s\) \['duration'\]"),
        ('{"audio_filepath": "a.wav", "text": "x", "duration": "3.2"}', "bad.jsonl:2: duration '3.2' is not a number"),
        ('["a.wav", "x", 1.0]', "bad.jsonl:2: expected a JSON object"),
    ],
)
def test_jsonl_manifest_errors(tmp_path, line, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"audio_filepath": "a.wav", "text": "ok", "duration": 1.0}\n' + line + "\n", encoding="utf-8")
    good = tmp_path / "good.jsonl"
    good.write_text("", encoding="utf-8")
    with pytest.raises(SpeechDataError, match=message):
        JsonlManifest(good, bad, good).splits()
    with pytest.raises(SpeechDataError, match="missing.jsonl does not exist"):
        JsonlManifest(good, good, os.fspath(tmp_path / "missing.jsonl")).splits()


def test_jsonl_manifest_undecodable_line_is_a_skipped_item(tmp_path):
    manifest = tmp_path / "train.jsonl"
    lines = [json.dumps({"audio_filepath": f"{name}.wav", "text": name, "duration": 1.0}) for name in ("a", "b")]
    undecodable = '{"text": "\xe9t\xe9"}\n'.encode("latin-1")
    manifest.write_bytes(f"{lines[0]}\n".encode() + undecodable + f"{lines[1]}\n".encode())
    source = JsonlManifest(manifest, manifest, manifest)
    a, skipped, b = source.splits()["train"]
    assert (a.key, b.key) == ("a.wav", "b.wav") and not hasattr(source, "bad_samples")
    assert skipped == Skipped(f"{manifest}:2", "invalid UTF-8",
                              "line 2 is not valid UTF-8 (invalid continuation byte); re-save the manifest as UTF-8")
