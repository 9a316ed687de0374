"""Bad input, generated (Hypothesis), through the real data module for text pairs, speech manifests and images.

Every case is a small data set: a few good items in each split and generated bad ones among them. It must end in
counted skips with every good item kept (and no bad one), or in a DataError (ConfigError) of one line that names
the file, line or pair. Any other exception is a bug of the source, plug-in or reader that met the input."""

from __future__ import annotations

import io
import json
import logging
import re
import struct
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from attend.config.errors import ConfigError
from attend.data import DataModule, ParallelText
from attend.data.audio import JsonlManifest
from attend.data.bad_samples import DataError
from tests.helpers.datamodules import caption_datamodule, speech_datamodule, text_datamodule
from tests.helpers.images import FileSource, record

SPLITS = ("train", "val", "test")
TARGETS = {"text": 150, "audio": 130, "image": 120}  # cases per modality (max_examples): ~30 s on one core in all
CASES: Counter = Counter()  # cases tried per modality, shrinking included


def suite(modality: str):
    return settings(max_examples=TARGETS[modality], deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@dataclass
class Expected:
    """What a case must give: per split, the keys kept as examples, the items counted as skips, and the keys that
    may go either way (a truncated file that still decodes); ``error``: why the data set as a whole is refused."""

    kept: dict[str, Counter] = field(default_factory=lambda: {split: Counter() for split in SPLITS})
    skipped: Counter = field(default_factory=Counter)
    either: dict[str, Counter] = field(default_factory=lambda: {split: Counter() for split in SPLITS})
    error: str | None = None

    def add(self, split: str, key: str, outcome: str) -> None:
        """``outcome``: "kept", "skipped", "either", or "long" / "long either" (over a length limit, or an empty
        target: skipped in training, which filters them; "kept" / "either" in evaluation)."""
        if outcome.startswith("long"):
            outcome = "skipped" if split == "train" else outcome.removeprefix("long").strip() or "kept"
        if outcome == "skipped":
            self.skipped[split] += 1
        else:
            (self.kept if outcome == "kept" else self.either)[split][key] += 1


def check(build: Callable[[], DataModule], expected: Expected, on_error: str, names: str,
          example_check: Callable[[dict], None] | None = None) -> None:
    """Build the case's data module and hold it to ``expected``; ``names``: a regex one of which a DataError names."""
    bad = sum(expected.skipped.values())
    either = sum(sum(keys.values()) for keys in expected.either.values())
    must_fail = expected.error is not None or (on_error == "raise" and bad > 0)
    try:
        with quiet():
            dm = build()
    except (DataError, ConfigError) as error:
        message = str(error)
        assert must_fail or (on_error == "raise" and either), f"good data refused: {message}"
        assert len(message.splitlines()) == 1, f"a DataError of several lines: {message!r}"
        assert re.search(names, message), f"the DataError names no file, line or pair: {message!r}"
        return
    assert not must_fail, f"expected a DataError ({expected.error or 'on_error=raise with bad items'})"
    for split in SPLITS:
        dataset = dm.datasets[split]
        examples = [dataset[i] for i in range(len(dataset))]
        kept = Counter(item["source"] for item in examples)
        lost, extra = expected.kept[split] - kept, kept - expected.kept[split]
        assert not lost, f"good {split} items lost: {sorted(lost)[:5]}"
        assert not extra - expected.either[split], f"bad {split} items kept: {sorted(extra - expected.either[split])}"
        kept_either = sum(extra.values())
        assert dm.skipped[split] == expected.skipped[split] + sum(expected.either[split].values()) - kept_either, (
            f"{split}: {dm.skipped[split]} skips counted ({dict(dm.bad_samples.reasons(split))}), expected "
            f"{expected.skipped[split]} (and {sum(expected.either[split].values()) - kept_either} of the either)")
        for item in examples if example_check else ():
            example_check(item)


@contextmanager
def quiet() -> Iterator[None]:
    """No warnings of skipped samples while a case builds (hundreds of cases would fill pytest's report)."""
    logger = logging.getLogger("attend.data")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


# text pairs ----------------------------------------------------------------------------------------
MAX_TOKENS = 16  # max_source_len and max_target_len of the text cases
WORDS = ["haus", "Katze", "baum", "wasser", "Grüße", "straße", "日本語", "über", "café", "x1", "3.5", "don't", "a😀"]
BLANKS = " \t\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u3000"
INVALID_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xa0\xa1", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf",
                "Grüße".encode("latin-1"), b"\xe2\x82"]

good_text = st.builds(lambda words, sep, pad: pad + sep.join(words) + pad,
                      st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), st.sampled_from([" ", "\t", "  "]),
                      st.sampled_from(["", " ", "\t "]))


def inserted(text: str, extra: bytes, where: float) -> bytes:
    raw = text.encode()
    cut = int(where * len(raw))
    while cut < len(raw) and (raw[cut] & 0xC0) == 0x80:  # not inside a character
        cut += 1
    return raw[:cut] + extra + raw[cut:]


# a side of a pair: (the line's bytes, "ok" | "line" (a bad line) | "long" (over the length limits), its text)
good_side = good_text.map(lambda t: (t.encode(), "ok", t.strip()))
text_side = st.one_of(
    good_side,
    st.just((b"", "line", None)),
    st.text(alphabet=BLANKS, min_size=1, max_size=6).map(lambda t: (t.encode(), "line", None)),
    st.builds(lambda t, bad, at: (inserted(t, bad, at), "line", None), good_text, st.sampled_from(INVALID_UTF8),
              st.floats(0, 1)),
    st.builds(lambda t, n, at: (inserted(t, b"\x00" * n, at), "line", None), good_text, st.integers(1, 3),
              st.floats(0, 1)),
    st.sampled_from([MAX_TOKENS + 1, 3 * MAX_TOKENS, 5000]).map(
        lambda n: (b"wort " * n, "long", ("wort " * n).strip())),
    st.integers(5_000, 200_000).map(lambda n: (b"x" * n, "ok", "x" * n)),  # a huge line of one token
    good_text.map(lambda t: (re.sub(r"[ \t]+", "\r", t).encode(), "ok", re.sub(r"[ \t]+", "\r", t).strip("\r"))),
)
good_pair = st.tuples(good_side, good_side)
text_pair = st.tuples(text_side, text_side)


@st.composite
def text_cases(draw) -> dict:
    splits = {}
    for split in SPLITS:
        items = draw(st.lists(good_pair, min_size=2 if split == "train" else 1, max_size=3))
        items += draw(st.lists(text_pair, max_size=5 if split == "train" else 2))
        items = draw(st.permutations(items))
        files = {}
        for side in (0, 1):
            endings = draw(st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=len(items), max_size=len(items)))
            files[side] = {"lines": [pair[side][0] for pair in items], "endings": endings,
                           "bom": draw(st.booleans()), "last_newline": draw(st.booleans())}
        splits[split] = {"pairs": items, "files": files}
    structure = draw(st.sampled_from([None] * 17 + ["one line short", "one blank line more", "a file missing"]))
    return {"splits": splits, "structure": (structure, draw(st.sampled_from(SPLITS)), draw(st.sampled_from([0, 1]))),
            "on_error": draw(st.sampled_from(["skip", "skip", "raise"]))}


def write_text_case(root: Path, case: dict) -> Expected:
    root.mkdir()
    expected = Expected()
    problem, problem_split, problem_side = case["structure"]
    for split, content in case["splits"].items():
        for pair in content["pairs"]:
            statuses = {pair[0][1], pair[1][1]}
            event(f"text pair: {' and '.join(sorted(statuses))}")
            outcome = "skipped" if "line" in statuses else "long" if "long" in statuses else "kept"
            expected.add(split, pair[0][2], outcome)
        for side, lang in ((0, "de"), (1, "en")):
            file = dict(content["files"][side])
            lines, endings = list(file["lines"]), list(file["endings"])
            if (split, side) == (problem_split, problem_side):
                if problem == "one line short":
                    lines, endings = lines[:-1], endings[:-1]
                elif problem == "one blank line more":
                    lines, endings, file["last_newline"] = [*lines, b""], [*endings, b"\n"], True
                elif problem == "a file missing":
                    continue
            if lines and not lines[-1]:
                file["last_newline"] = True  # a last line that is empty exists only with its line end
            data = b"".join(line + ending for line, ending in zip(lines, endings, strict=True))
            if not file["last_newline"] and lines:
                data = data[: -len(endings[-1])]
            (root / f"{split}.{lang}").write_bytes((b"\xef\xbb\xbf" if file["bom"] else b"") + data)
    expected.error = problem
    event(f"text case: {problem or case['on_error']}")
    return expected


@suite("text")
@given(case=text_cases())
def test_text_pairs(case: dict) -> None:
    CASES["text"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        expected = write_text_case(folder / "corpus", case)

        def build() -> DataModule:
            dm = text_datamodule(ParallelText(folder / "corpus"), max_source_len=MAX_TOKENS,
                                 max_target_len=MAX_TOKENS, cache_dir=folder / "cache", max_skip_fraction=1.0,
                                 on_error=case["on_error"])
            dm.prepare_data()
            dm.setup("fit")
            return dm

        check(build, expected, case["on_error"], rf"{re.escape(str(folder))}|\bpair \d+ \(")


# speech manifests ----------------------------------------------------------------------------------
MAX_FRAMES = 150  # max_source_len of the speech cases: 1.5 s of 10 ms frames
RATES = [8000, 11025, 16000, 22050, 44100, 96000]
FORMATS = [("WAV", subtype) for subtype in ("PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE")] + [
    ("FLAC", "PCM_16"), ("FLAC", "PCM_24"), ("OGG", "VORBIS")]
TRANSCRIPTS = ["one two", "Three", "grüße", "ÉCOLE naïve", "don't stop", "日本語", "x1 y2"]
EMPTY_TRANSCRIPTS = ["", "   ", "!!!", "—", "' '"]  # nothing a character tokenizer keeps after normalizing
NOT_AUDIO = ["../../etc/passwd", "/etc/passwd", "/etc/hostname", "/dev/null", "/", "/tmp", "..", ".", "",
             "/proc/self/status", "nothere.wav#0+100", "a" * 300 + ".wav", "zz\x00.wav", "zz\nnew line.wav",
             "zz/../../../../../../../../etc/passwd"]

good_audio = st.fixed_dictionaries({
    "kind": st.just("good"), "rate": st.sampled_from(RATES), "channels": st.integers(1, 3),
    "format": st.sampled_from(FORMATS), "seconds": st.floats(0.05, 0.8),
    "signal": st.sampled_from(["tone", "noise", "silence", "dc"])})
# an audio file: (spec, outcome) with outcome "kept", "skipped", "either" (a truncated file may still decode) or "long"
audio_file = st.one_of(
    good_audio.map(lambda spec: (spec, "kept")),
    good_audio.map(lambda spec: ({**spec, "signal": "long", "seconds": 2.5}, "long")),
    st.builds(lambda spec, value, at: ({**spec, "format": ("WAV", "FLOAT"), "signal": value, "at": at}, "skipped"),
              good_audio, st.sampled_from(["nan", "inf", "-inf", "huge"]), st.floats(0, 1)),
    st.builds(lambda spec, n: ({**spec, "kind": "few", "samples": n}, "skipped"), good_audio, st.integers(0, 50)),
    st.builds(lambda spec, at: ({**spec, "kind": "truncated", "at": at}, "either"), good_audio, st.floats(0.3, 1)),
    st.builds(lambda spec, at: ({**spec, "kind": "truncated", "at": at}, "skipped"), good_audio, st.floats(0, 0.01)),
    st.binary(max_size=3000).map(lambda data: ({"kind": "bytes", "data": data}, "skipped")),
    st.just(({"kind": "bytes", "data": b"RIFF\x24\x00\x00\x00WAVEfmt garbage" * 10}, "skipped")),
    st.just(({"kind": "missing"}, "skipped")),
    st.just(({"kind": "folder"}, "skipped")),
    st.sampled_from(NOT_AUDIO).map(lambda path: ({"kind": "path", "path": path}, "skipped")),
    st.text(max_size=12).map(lambda name: ({"kind": "path", "path": "zz" + name}, "skipped")),
)
# a manifest line: (entry or raw bytes, outcome); "error": the manifest is malformed, the data set refused
WRONG_TYPES = {"audio_filepath": [1, None, [], {}, True, 2.5], "text": [1, None, ["a"], {}, False],
               "duration": ["1.0", None, -1, -0.5, True, [1], {}, float("nan"), float("inf"), float("-inf")]}
LINE = '{{"audio_filepath": "{path}", "text": "a b", "duration": {duration}}}'
RAW_LINES = {  # malformed manifest lines by name (the name is what a failing case prints)
    "an array": b"[1, 2]", "a string": b'"a string"', "a number": b"42", "null": b"null", "an open brace": b"{",
    "a close brace": b"}", "two objects": b'{"a": 1} {"b": 2}', "arrays 100000 deep": b"[" * 100_000,
    "a 400-digit duration": LINE.format(path="x.wav", duration="1" + "0" * 400).encode(),
    "a 5000-digit duration": LINE.format(path="x.wav", duration="1" + "0" * 5000).encode(),
    "a duration of 1e999": LINE.format(path="x.wav", duration="1e999").encode(),
    "a lone surrogate in the path": LINE.format(path="zz\\ud800.wav", duration=1).encode(),
    "a lone surrogate in the speaker": b'{"audio_filepath": "x.wav", "text": "a", "duration": 1, "speaker": "\\udc00"}',
}
bad_manifest_line = st.one_of(
    st.builds(lambda key, value: ({"wrong": (key, value)}, "error"), st.sampled_from(list(WRONG_TYPES)),
              st.integers(0, 9)),
    st.lists(st.sampled_from(["audio_filepath", "text", "duration"]), min_size=1, unique=True).map(
        lambda keys: ({"drop": keys}, "error")),
    st.floats(0, 0.99).map(lambda at: ({"cut": at}, "error")),
    st.sampled_from(list(RAW_LINES)).map(lambda name: ({"raw": name}, "error")),
)


@st.composite
def audio_items(draw, good: bool) -> tuple[dict, str]:
    """One manifest line: its audio file, transcript, JSON form and line end, and the outcome."""
    file, outcome = draw(st.tuples(good_audio, st.just("kept")) if good else audio_file)
    item = {"file": file, "text": draw(st.sampled_from(TRANSCRIPTS)), "speaker": None,
            "ensure_ascii": draw(st.booleans()), "ending": draw(st.sampled_from(["\n", "\r\n"])),
            "duration": draw(st.sampled_from([0.5, 0, 3, 1e6]))}
    if good:
        return item, outcome
    change = draw(st.sampled_from(["none", "none", "empty text", "speaker", "not UTF-8", "blank line"]))
    if change == "empty text":
        item["text"] = draw(st.sampled_from(EMPTY_TRANSCRIPTS))  # an empty target: training filters it
        outcome = {"kept": "long", "either": "long either"}.get(outcome, outcome)
    elif change == "speaker":
        item["speaker"] = draw(st.sampled_from([7, ["a"], {"x": 1}, "spk", ""]))
    elif change == "not UTF-8":
        item["latin1"], outcome = True, "skipped"
    elif change == "blank line":
        item["blank"], outcome = draw(st.sampled_from([b"", b"   ", b"\t"])), "ignored"
    return item, outcome


@st.composite
def audio_cases(draw) -> dict:
    splits = {}
    for split in SPLITS:
        items = draw(st.lists(audio_items(good=True), min_size=2 if split == "train" else 1, max_size=3))
        items += draw(st.lists(audio_items(good=False), max_size=5 if split == "train" else 2))
        splits[split] = draw(st.permutations(items))
    if draw(st.sampled_from([False, False, True])):  # a malformed line: the manifest is refused
        item, _ = draw(audio_items(good=True))
        item["manifest"], outcome = draw(bad_manifest_line)
        split = draw(st.sampled_from(SPLITS))
        splits[split].insert(draw(st.integers(0, len(splits[split]))), (item, outcome))
    return {"splits": splits, "on_error": draw(st.sampled_from(["skip", "skip", "raise"])),
            "manifest missing": draw(st.sampled_from([None] * 29 + list(SPLITS)))}


def plain_item(file: dict | None = None) -> dict:
    """A manifest line of a 0.3 s tone (or of ``file``), for the explicit examples."""
    tone = {"kind": "good", "rate": 16000, "channels": 1, "format": ("WAV", "PCM_16"), "seconds": 0.3, "signal": "tone"}
    return {"file": file or tone, "text": "one two", "speaker": None, "ensure_ascii": True, "ending": "\n",
            "duration": 0.3}


LINE_BREAK_CASE = {  # a missing file whose name holds a line break, with on_error=raise: the DataError stays one line
    "splits": {"train": [(plain_item(), "kept"), (plain_item({"kind": "path", "path": "zz\nnew line.wav"}), "skipped"),
                         (plain_item(), "kept")],
               "val": [(plain_item(), "kept")], "test": [(plain_item(), "kept")]},
    "on_error": "raise", "manifest missing": None}


def signal(spec: dict) -> np.ndarray:
    """(samples, channels) float64 of a good file's spec."""
    n, rate = max(1, int(spec["seconds"] * spec["rate"])), spec["rate"]
    t = np.arange(n)[:, None] / rate
    wave = {"tone": 0.3 * np.sin(2 * np.pi * 440 * t) + 0 * t,
            "noise": np.random.default_rng(n).uniform(-0.5, 0.5, (n, 1)),
            "silence": np.zeros((n, 1)), "dc": np.full((n, 1), 0.25),
            "long": 0.3 * np.sin(2 * np.pi * 300 * t)}.get(spec["signal"], 0.3 * np.sin(2 * np.pi * 220 * t))
    wave = np.repeat(wave, spec["channels"], axis=1)
    if spec["signal"] in ("nan", "inf", "-inf", "huge"):  # one sample (or every one: huge) gone bad
        wave[min(n - 1, int(spec["at"] * n)), 0] = float(spec["signal"]) if spec["signal"] != "huge" else 0
        if spec["signal"] == "huge":
            wave *= 1e20
    return wave


def write_audio(path: Path, spec: dict) -> str | None:
    """Write the spec's file at ``path``; the manifest's audio_filepath when it is another (a path, not a file)."""
    kind = spec["kind"]
    if kind == "path":
        return spec["path"]
    if kind == "missing":
        return None
    if kind == "folder":
        path.mkdir()
        return None
    if kind == "bytes":
        path.write_bytes(spec["data"])
        return None
    fmt, subtype = spec["format"]
    if kind == "few":
        with sf.SoundFile(path, "w", spec["rate"], spec["channels"], subtype, format=fmt) as f:
            f.write(np.full((spec["samples"], spec["channels"]), 0.1))
        return None
    buffer = io.BytesIO()
    sf.write(buffer, signal(spec), spec["rate"], subtype, format=fmt)
    data = buffer.getvalue()
    path.write_bytes(data[: int(spec["at"] * len(data))] if kind == "truncated" else data)
    return None


def manifest_line(folder: Path, name: str, item: dict) -> bytes:
    """The item's manifest line (its file written into ``folder`` as ``name``), its line end included."""
    ending = item["ending"].encode()
    if "blank" in item:
        return item["blank"] + ending
    audio = write_audio(folder / name, item["file"])
    audio = name if audio is None else audio
    entry = {"audio_filepath": audio, "text": item["text"], "duration": item["duration"]}
    if item["speaker"] is not None:
        entry["speaker"] = item["speaker"]
    problem = item.get("manifest", {})
    if "raw" in problem:
        return RAW_LINES[problem["raw"]] + ending
    if "wrong" in problem:
        key, index = problem["wrong"]
        entry[key] = WRONG_TYPES[key][index % len(WRONG_TYPES[key])]
    for key in problem.get("drop", []):
        del entry[key]
    line = json.dumps(entry, ensure_ascii=item["ensure_ascii"] or "\n" in audio)
    if "cut" in problem:
        line = line[: max(1, int(problem["cut"] * len(line)))]
    raw = line.encode("utf-8", "surrogatepass")
    if item.get("latin1"):
        raw = line.replace(entry["text"], entry["text"] + " grüße").encode("latin-1", "replace")
    return raw + ending


def write_audio_case(folder: Path, case: dict) -> tuple[JsonlManifest, Expected]:
    folder.mkdir()
    expected, files = Expected(), {}
    for split, items in case["splits"].items():
        lines = []
        for i, (item, outcome) in enumerate(items):
            name = f"{split}_{i}.wav"
            lines.append(manifest_line(folder, name, item))
            key = item["file"].get("path", name) if item["file"]["kind"] == "path" else name
            event(f"audio file: {item['file']['kind']}, {outcome}")
            if outcome == "error":
                expected.error = f"a malformed manifest line {item['manifest']}"
            elif outcome != "ignored":
                expected.add(split, key, outcome)
        files[split] = folder / f"{split}.jsonl"
        if case["manifest missing"] != split:
            files[split].write_bytes(b"".join(lines))
    if case["manifest missing"]:
        expected.error = f"the {case['manifest missing']} manifest is missing"
    return JsonlManifest(**files), expected


def finite_features(example: dict) -> None:
    assert torch.isfinite(example["src"]).all(), f"features of {example['source']!r} are not finite"


@suite("audio")
@given(case=audio_cases())
@example(case=LINE_BREAK_CASE)
def test_speech_manifests(case: dict) -> None:
    CASES["audio"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifest, expected = write_audio_case(folder / "audio", case)

        def build() -> DataModule:
            dm = speech_datamodule(manifest, max_source_len=MAX_FRAMES, cache_dir=folder / "cache",
                                   max_skip_fraction=1.0, on_error=case["on_error"])
            dm.prepare_data()
            dm.setup("fit")
            return dm

        not_audio = "|".join(re.escape(path) for path in NOT_AUDIO if path.startswith("/") and len(path) > 1)
        event(f"audio: {'refused' if expected.error else case['on_error']}")
        check(build, expected, case["on_error"], rf"{re.escape(str(folder))}|{not_audio}", finite_features)


# images ----------------------------------------------------------------------------------------------
MODES = [("RGB", "PNG"), ("RGB", "JPEG"), ("RGB", "BMP"), ("RGB", "GIF"), ("RGB", "WEBP"), ("RGB", "TIFF"),
         ("L", "PNG"), ("L", "JPEG"), ("LA", "PNG"), ("P", "PNG"), ("P", "GIF"), ("P transparent", "PNG"),
         ("RGBA", "PNG"), ("CMYK", "JPEG"), ("CMYK", "TIFF"), ("1", "PNG"), ("I;16", "PNG"), ("I", "TIFF"),
         ("F", "TIFF")]
EXTENSIONS = {"PNG": "png", "JPEG": "jpg", "BMP": "bmp", "GIF": "gif", "WEBP": "webp", "TIFF": "tif"}
good_image = st.fixed_dictionaries({
    "kind": st.just("good"), "mode": st.sampled_from(MODES), "size": st.tuples(st.integers(1, 40), st.integers(1, 40)),
    "noise": st.booleans(), "right extension": st.booleans()})
# an image file: (spec, outcome); "either": a flipped byte a decoder may not notice
image_file = st.one_of(
    good_image.map(lambda spec: (spec, "kept")),
    st.sampled_from([(1, 1), (20000, 1), (1, 20000), (30000, 2)]).map(
        lambda size: ({"kind": "good", "mode": ("RGB", "PNG"), "size": size, "noise": False, "right extension": True},
                      "kept")),
    st.sampled_from([(20000, 20000), (65535, 65535), (300000, 1000), (20000, 1), (0, 5)]).map(
        lambda size: ({"kind": "claims", "size": size}, "skipped")),
    st.builds(lambda fmt, at: ({"kind": "truncated", "format": fmt, "at": at}, "skipped"),
              st.sampled_from(["PNG", "JPEG", "GIF", "WEBP", "TIFF"]), st.floats(0, 0.9)),
    st.builds(lambda fmt, at: ({"kind": "flipped", "format": fmt, "at": at}, "either"),
              st.sampled_from(["PNG", "JPEG"]), st.floats(0, 1)),
    st.binary(max_size=2000).map(lambda data: ({"kind": "bytes", "data": data}, "skipped")),
    st.sampled_from([b"", b"hello", b"<svg xmlns='http://www.w3.org/2000/svg'/>", b"\x89PNG\r\n\x1a\n",
                     b"\xff\xd8"]).map(lambda data: ({"kind": "bytes", "data": data}, "skipped")),
    st.sampled_from(["missing", "folder", "long name", "a line break in its name"]).map(
        lambda kind: ({"kind": kind}, "skipped")),
    st.just(({"kind": "animated"}, "kept")),
)


@st.composite
def image_cases(draw) -> dict:
    splits = {}
    for split in SPLITS:
        items = draw(st.lists(st.tuples(good_image, st.just("kept")), min_size=2 if split == "train" else 1,
                              max_size=3))
        items += draw(st.lists(image_file, max_size=5 if split == "train" else 2))
        splits[split] = draw(st.permutations(items))
    return {"splits": splits, "on_error": draw(st.sampled_from(["skip", "skip", "raise"]))}


def picture(spec: dict) -> Image.Image:
    """The good image of a spec, in its mode."""
    width, height = spec["size"]
    mode = spec["mode"][0]
    if spec["noise"]:
        pixels = np.random.default_rng(width * 1000 + height).integers(0, 256, (height, width, 3), dtype=np.uint8)
        image = Image.fromarray(pixels, "RGB")
    else:
        image = Image.new("RGB", (width, height), (200, 30, 90))
    if mode == "P transparent":
        image = image.convert("P")
        image.info["transparency"] = 0
        return image
    if mode in ("I;16", "I", "F"):
        return image.convert("L").convert(mode)
    return image.convert(mode)


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A 1 x 1 PNG whose header says ``width`` x ``height`` (its checksum made to agree)."""
    data = bytearray(encoded(Image.new("L", (1, 1)), "PNG"))
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def write_image(folder: Path, name: str, spec: dict) -> Path:
    """Write the spec's file into ``folder`` (or not: missing, a folder, a name too long) and return its path."""
    kind, path = spec["kind"], folder / name
    if kind == "good":
        mode, fmt = spec["mode"]
        path = path.with_suffix("." + (EXTENSIONS[fmt] if spec["right extension"] else "jpg"))
        path.write_bytes(encoded(picture(spec), fmt))
    elif kind == "claims":
        path.write_bytes(png_claiming(*spec["size"]))
    elif kind in ("truncated", "flipped"):
        data = bytearray(encoded(picture({"size": (48, 48), "noise": True, "mode": ("RGB", "")}), spec["format"]))
        at = min(len(data) - 1, int(spec["at"] * len(data)))
        if kind == "flipped":
            data[at] ^= 0xFF
        path.write_bytes(bytes(data if kind == "flipped" else data[:at]))
    elif kind == "bytes":
        path.write_bytes(spec["data"])
    elif kind == "folder":
        path.mkdir()
    elif kind == "long name":
        path = folder / ("a" * 300 + name)
    elif kind == "a line break in its name":
        path = folder / f"line\nbreak {name}"
        path.write_bytes(b"not an image")
    elif kind == "animated":
        frames = [Image.new("RGB", (12, 10), colour) for colour in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
        frames[0].save(path.with_suffix(".gif"), save_all=True, append_images=frames[1:], duration=50, loop=0)
        path = path.with_suffix(".gif")
    return path


def write_image_case(folder: Path, case: dict) -> tuple[FileSource, Expected]:
    folder.mkdir()
    expected, splits = Expected(), {}
    for split, items in case["splits"].items():
        records = []
        for i, (spec, outcome) in enumerate(items):
            path = write_image(folder, f"{split}_{i}.png", spec)
            records.append(record(str(path), f"a picture number {i}"))
            expected.add(split, path.name, outcome)
            event(f"image file: {spec['kind']}, {outcome}")
        splits[split] = records
    return FileSource(folder, splits), expected


@suite("image")
@given(case=image_cases())
def test_images(case: dict) -> None:
    CASES["image"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source, expected = write_image_case(folder / "images", case)

        def build() -> DataModule:
            dm = caption_datamodule(source, cache_dir=folder / "cache", max_skip_fraction=1.0,
                                    on_error=case["on_error"])
            dm.prepare_data()
            dm.setup("fit")
            return dm

        event(f"images: {case['on_error']}")
        check(build, expected, case["on_error"], re.escape(str(folder)))


def test_case_counts() -> None:
    """How many generated cases each modality's test tried (run after them: pytest keeps the file's order)."""
    ran = {modality: CASES[modality] for modality in TARGETS if CASES[modality]}
    if not ran:
        pytest.skip("no generated case ran (the tests above were deselected)")
    print("bad-input cases tried: " + ", ".join(f"{modality} {count}" for modality, count in ran.items())
          + f"; {sum(ran.values())} in all")
    for modality, count in ran.items():
        assert count >= TARGETS[modality], f"{modality}: {count} cases, fewer than {TARGETS[modality]}"
