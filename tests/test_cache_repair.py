"""A truncated or overwritten data-cache file is named in a warning and rebuilt, never a traceback: every kind
Attend writes (example-store shards and manifests of all three modalities, Ding pairs JSON, SentencePiece
model, espeak-ng manifest)."""

from __future__ import annotations

import json
import logging
import random
import shutil
from pathlib import Path

import pytest
import sentencepiece
import torch

from attend.data import (
    CaptionDataModule,
    CharTokenizer,
    LogMelFrontEnd,
    ParallelText,
    SentencePieceTokenizer,
    SpeechDataModule,
    TranslationDataModule,
    WordTokenizer,
)
from attend.data.audio import JsonlManifest
from attend.data.cache import load_or_rebuild
from attend.data.images import KarpathyJSON, ShapeScenes
from attend.data.text.ding import DingPairs
from attend.data.tokenizers.sentencepiece import read_complete_model, top_level_fields
from tests.test_caption_sources import coco_image, write_json
from tests.test_data import MULTI30K
from tests.test_data_sources import DING_SAMPLE
from tests.test_speech_datamodule import TEXTS, write_manifest
from tests.test_speech_sources import HAS_ESPEAK, tiny_espeak


def truncate(path: Path, size: int | None = None) -> None:
    """Cut ``path`` to ``size`` bytes (half by default), as an interrupted copy or a full disk leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if size is None else size])


def overwrite_with_garbage(path: Path) -> None:
    """Replace ``path`` by random bytes of the same length."""
    path.write_bytes(random.Random(0).randbytes(path.stat().st_size))


def warned_about(caplog: pytest.LogCaptureFixture, path: Path) -> bool:
    """Whether a warning said that ``path`` is corrupt and is being rebuilt."""
    return any(
        record.levelno == logging.WARNING and str(path) in record.getMessage() and "rebuilding" in record.getMessage()
        for record in caplog.records
    )


def only_file(folder: Path, pattern: str) -> Path:
    (path,) = folder.glob(pattern)
    return path


# Ding pairs JSON ------------------------------------------------------------------------------
def ding_datamodule(cache_dir: Path) -> TranslationDataModule:
    source = DingPairs(path=DING_SAMPLE, n_val=3, n_test=4, seed=7, cache_dir=cache_dir)
    dm = TranslationDataModule(source, WordTokenizer(), WordTokenizer(), cache_dir=cache_dir)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def translation_data(dm: TranslationDataModule) -> list:
    """Every split's token ids and texts."""
    return [[d[i] for i in range(len(d))] for d in (dm.train_dataset, dm.val_dataset, dm.test_dataset)]


def forget_stores(cache_dir: Path) -> None:
    """Remove the example stores, so the next start reads the source (and its caches) again."""
    shutil.rmtree(cache_dir / "store")


def cut_inside_a_character(path: Path) -> None:
    """Cut ``path`` after the first byte of its first multi-byte UTF-8 character past the middle."""
    data = path.read_bytes()
    at = next(i for i in range(len(data) // 2, len(data)) if data[i] >= 0xC0)  # a UTF-8 lead byte
    path.write_bytes(data[: at + 1])


@pytest.mark.parametrize("damage", [truncate, cut_inside_a_character, overwrite_with_garbage])
def test_ding_cache_is_rebuilt(damage, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = ding_datamodule(tmp_path)
    path = only_file(tmp_path, "ding-*.json")
    built = path.read_bytes()
    damage(path)
    forget_stores(tmp_path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = ding_datamodule(tmp_path)
    assert warned_about(caplog, path)
    assert translation_data(again) == translation_data(first)
    assert path.read_bytes() == built and json.loads(path.read_text(encoding="utf-8"))["splits"]


def test_ding_cache_cut_inside_a_character_was_a_unicode_error(tmp_path: Path) -> None:
    """The issue's case: such a file does not even decode, so json.load alone raised UnicodeDecodeError."""
    ding_datamodule(tmp_path)
    path = only_file(tmp_path, "ding-*.json")
    cut_inside_a_character(path)
    with pytest.raises(UnicodeDecodeError):
        path.read_text(encoding="utf-8")


# SentencePiece model ---------------------------------------------------------------------------
def spm_datamodule(cache_dir: Path) -> TranslationDataModule:
    tokenizer = SentencePieceTokenizer(vocab_size=80, hard_vocab_limit=False, num_threads=1)
    dm = TranslationDataModule(ParallelText(MULTI30K), tokenizer, WordTokenizer(), cache_dir=cache_dir)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def field_boundary_near_half(proto: bytes) -> int:
    """The end of the top-level protobuf field nearest the middle: a prefix that still parses."""
    ends = [n for n in range(1, len(proto)) if _parses(proto[:n])]
    return min(ends, key=lambda end: abs(end - len(proto) // 2))


def _parses(prefix: bytes) -> bool:
    try:
        top_level_fields(prefix)
    except ValueError:
        return False
    return True


def test_sentencepiece_model_cut_between_pieces_is_retrained(tmp_path: Path, caplog) -> None:
    """Cut at a field boundary, a model still loads in SentencePiece (with fewer pieces): the check must see it."""
    first = spm_datamodule(tmp_path)
    path = only_file(tmp_path, "spm-*.model")
    built = path.read_bytes()
    cut = field_boundary_near_half(built)
    pieces = sentencepiece.SentencePieceProcessor(model_proto=built[:cut]).get_piece_size()
    assert 0 < pieces < first.src_tokenizer.vocab_size
    truncate(path, cut)
    forget_stores(tmp_path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = spm_datamodule(tmp_path)
    assert warned_about(caplog, path)
    assert translation_data(again) == translation_data(first)
    assert path.read_bytes() == built and read_complete_model(path) == built


@pytest.mark.parametrize("damage", [truncate, overwrite_with_garbage])
def test_sentencepiece_model_is_retrained(damage, tmp_path: Path, caplog) -> None:
    first = spm_datamodule(tmp_path)
    path = only_file(tmp_path, "spm-*.model")
    built = path.read_bytes()
    damage(path)
    forget_stores(tmp_path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = spm_datamodule(tmp_path)
    assert warned_about(caplog, path)
    assert translation_data(again) == translation_data(first) and path.read_bytes() == built


def test_every_prefix_of_a_sentencepiece_model_is_caught(tmp_path: Path) -> None:
    dm = spm_datamodule(tmp_path)
    proto = dm.src_tokenizer.model_proto
    path = tmp_path / "cut.model"
    for size in range(0, len(proto), 3):
        path.write_bytes(proto[:size])
        with pytest.raises((ValueError, RuntimeError)):
            read_complete_model(path)


# example stores of all three modalities ----------------------------------------------------------
def caption_datamodule(cache_dir: Path) -> CaptionDataModule:
    source = ShapeScenes(n_train=12, n_val=3, n_test=2, image_size=32)
    dm = CaptionDataModule(
        source, WordTokenizer(lowercase=True), cache_dir=cache_dir, image_size=32, batch_size=4, augment=False
    )
    dm.prepare_data()
    dm.setup("fit")
    return dm


def speech_datamodule(cache_dir: Path) -> SpeechDataModule:
    audio = cache_dir.parent / "audio"
    if not (audio / "test.jsonl").is_file():  # written once: a rewritten file is another corpus, with new stores
        write_manifest(audio, "train", [0.5, 0.8, 0.6, 0.7], TEXTS[:4])
        write_manifest(audio, "val", [0.6, 0.9], TEXTS[:2])
        write_manifest(audio, "test", [0.7, 0.5], TEXTS[2:4])
    source = JsonlManifest(**{split: str(audio / f"{split}.jsonl") for split in ("train", "val", "test")})
    dm = SpeechDataModule(
        source, tokenizer=CharTokenizer(), frontend=LogMelFrontEnd(n_mels=40), spec_augment=None, batch_size=2,
        cache_dir=str(cache_dir),
    )
    dm.prepare_data()
    dm.setup()
    return dm


def text_datamodule(cache_dir: Path) -> TranslationDataModule:
    dm = TranslationDataModule(ParallelText(MULTI30K), WordTokenizer(), WordTokenizer(), cache_dir=cache_dir,
                               shard_size=8)  # several shards a split
    dm.prepare_data()
    dm.setup("fit")
    return dm


MODALITIES = {"text": text_datamodule, "images": caption_datamodule, "audio": speech_datamodule}


def every_example(dm) -> list:
    """Every example of every split, as the loaders see them (image and feature tensors included)."""
    return [[dm.datasets[split][i] for i in range(len(dm.datasets[split]))] for split in ("train", "val", "test")]


def same_examples(a: list, b: list) -> bool:
    def same(x, y) -> bool:
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and torch.equal(x, y)
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, list | tuple):
            return len(x) == len(y) and all(same(i, j) for i, j in zip(x, y, strict=True))
        return x == y

    return same(a, b)


def store_files(cache_dir: Path, name: str) -> list[Path]:
    """``name`` ("manifest.json", or "shard" for every shard file) in every example store under ``cache_dir``."""
    pattern = "shard-*.arrow" if name == "shard" else name
    return sorted((cache_dir / "store").glob(f"*/{pattern}"))


@pytest.mark.parametrize("modality", list(MODALITIES))
@pytest.mark.parametrize("damage", [truncate, overwrite_with_garbage])
@pytest.mark.parametrize("kind", ["shard", "manifest.json"])
def test_a_damaged_store_file_is_named_and_rebuilt(modality, damage, kind, tmp_path: Path, caplog) -> None:
    build = MODALITIES[modality]
    cache_dir = tmp_path / "cache"
    first = every_example(build(cache_dir))
    files = store_files(cache_dir, kind)
    assert files, f"no {kind} in the {modality} stores"
    built = {path: path.read_bytes() for path in files}
    for path in files:
        damage(path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = every_example(build(cache_dir))
    assert same_examples(again, first)
    for path in files:
        assert warned_about(caplog, path.parent)  # the store named, with "rebuilding"
        assert path.read_bytes() == built[path]  # whole again, byte for byte


def test_a_missing_shard_is_rebuilt_and_the_others_are_kept(tmp_path: Path, caplog) -> None:
    first = every_example(text_datamodule(tmp_path))
    shards = store_files(tmp_path, "shard")
    assert len(shards) > 3  # the training split has several
    kept = {path: path.stat().st_mtime_ns for path in shards[1:]}
    shards[0].unlink()
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        assert same_examples(every_example(text_datamodule(tmp_path)), first)
    assert warned_about(caplog, shards[0].parent) and shards[0].is_file()
    assert all(path.stat().st_mtime_ns == mtime for path, mtime in kept.items())  # not prepared again


# Karpathy split records ------------------------------------------------------------------------
@pytest.mark.parametrize("damage", [truncate, overwrite_with_garbage])
def test_karpathy_records_pickle_is_rebuilt(damage, tmp_path: Path, caplog, monkeypatch) -> None:
    images = [coco_image(filename=f"{i}.jpg", split=("train", "val", "test")[i % 3]) for i in range(9)]
    path = write_json(tmp_path / "dataset_coco.json", images)
    first = KarpathyJSON(path, tmp_path / "coco", cache_dir=tmp_path / "cache").splits()
    (cached,) = (tmp_path / "cache" / "karpathy").glob("*.pkl")
    with monkeypatch.context() as patched:  # a second read takes the pickle, not the JSON
        patched.setattr(json, "load", lambda *a, **k: pytest.fail("must not parse the JSON again"))
        assert KarpathyJSON(path, tmp_path / "coco", cache_dir=tmp_path / "cache").splits() == first
    damage(cached)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = KarpathyJSON(path, tmp_path / "coco", cache_dir=tmp_path / "cache").splits()
    assert warned_about(caplog, cached) and again == first
    write_json(path, images[:6])  # an edited file is read again
    assert len(KarpathyJSON(path, tmp_path / "coco", cache_dir=tmp_path / "cache").splits()["train"]) == 2


# espeak-ng manifest ----------------------------------------------------------------------------
def drop_a_split(path: Path) -> None:
    """A manifest that is valid JSON but misses an entry."""
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest["splits"]["val"]
    path.write_text(json.dumps(manifest), encoding="utf-8")


@pytest.mark.skipif(not HAS_ESPEAK, reason="espeak-ng is not installed")
@pytest.mark.parametrize("damage", [truncate, drop_a_split])
def test_espeak_manifest_is_rebuilt(damage, tmp_path: Path, caplog) -> None:
    first = tiny_espeak(tmp_path).splits()
    path = tiny_espeak(tmp_path).folder() / "manifest.json"
    damage(path)
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        again = tiny_espeak(tmp_path).splits()
    assert warned_about(caplog, path)
    assert again == first
    assert set(json.loads(path.read_text(encoding="utf-8"))["splits"]) == {"train", "val", "test"}


# the helper -----------------------------------------------------------------------------------
def test_load_or_rebuild_rebuilds_an_old_format_quietly_and_lets_on_cached_errors_through(tmp_path, caplog) -> None:
    path = tmp_path / "x.json"
    path.write_text("{}", encoding="utf-8")
    save = lambda data, p: p.write_text(json.dumps(data), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="attend.data"):
        assert load_or_rebuild(path, lambda p: None, lambda: {"v": 1}, save) == {"v": 1}  # None: out of date
    assert not caplog.records and json.loads(path.read_text()) == {"v": 1}
    read = lambda p: json.loads(p.read_text())

    def refuse(cached):
        raise KeyError("not a corruption: it must propagate")

    with pytest.raises(KeyError, match="propagate"):
        load_or_rebuild(path, read, lambda: pytest.fail("no rebuild"), save, on_cached=refuse)
    assert load_or_rebuild(None, read, lambda: 5, save) == 5  # no cache folder
