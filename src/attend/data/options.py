"""Data options that were renamed when the three data modules became one (issue 25): a user's config that still
spells one the old way is refused at start-up with the new name (``renamed_options``), and the config saved in an
older checkpoint is rewritten to the new form (``upgrade``), so that checkpoint still evaluates."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

OLD_MODULES = {  # the old classes, and the plug-in each one's options now belong to
    "attend.data.TranslationDataModule": "attend.data.TextModality",
    "attend.data.CaptionDataModule": "attend.data.ImageModality",
    "attend.data.SpeechDataModule": "attend.data.AudioModality",
}
RENAMED = {  # old data option -> where it lives now (under data)
    "batch_size": "loader.batch_size", "eval_batch_size": "loader.eval_batch_size", "max_tokens": "loader.max_tokens",
    "max_frames": "loader.max_tokens", "num_workers": "loader.num_workers", "bucket": "loader.bucket",
    "src_tokenizer": "modality.tokenizer", "tgt_tokenizer": "tokenizer", "image_size": "modality.image_size",
    "augment": "modality.augment", "hflip": "modality.hflip", "precompute_features": "modality.precompute_features",
    "feature_crops": "modality.feature_crops", "frontend": "modality.frontend", "spec_augment": "modality.spec_augment",
    "precompute": "modality.precompute", "max_transcript_chars": "max_target_len", "max_duration": "max_source_len",
}
RENAMED_SOURCE = {"num_train": "n_train", "num_val": "n_val", "num_test": "n_test"}
DROPPED = ("tokenizer_states",)  # options that went without a successor (tokenizers come from a checkpoint)
CACHING_SOURCES = ("DingPairs", "KarpathyJSON")  # their cache_dir went: the example store is the only cache now


def renamed_options(data: DictConfig) -> list[str]:
    """One message per option of ``data`` spelt the old way, naming the new spelling."""
    messages = []
    if data.get("_target_") in OLD_MODULES:
        messages.append(f"data._target_={data._target_} is now attend.data.DataModule, with "
                        f"data.modality._target_={OLD_MODULES[data._target_]}")
    for old, new in RENAMED.items():
        if old in data:
            unit = " (in feature frames, not seconds: 100 a second at a 10 ms hop)" if old == "max_duration" else ""
            messages.append(f"data.{old} is now data.{new}{unit}")
    for old in DROPPED:
        if old in data:
            messages.append(f"data.{old} is gone: a checkpoint's tokenizers are loaded by eval.py and predict.py")
    for old, new in RENAMED_SOURCE.items():
        if isinstance(data.get("source"), DictConfig) and old in data.source:
            messages.append(f"data.source.{old} is now data.source.{new}")
    return messages


def upgrade(data: DictConfig) -> DictConfig:
    """A data config saved before the rename, in today's form (a current one is returned unchanged)."""
    old = OmegaConf.to_container(data, resolve=False)
    assert isinstance(old, dict)
    target = old.get("_target_")
    if target not in OLD_MODULES and not any(key in old for key in RENAMED):
        return data
    new: dict[str, Any] = {key: value for key, value in old.items() if key not in RENAMED and key not in DROPPED}
    modality = dict(new.get("modality") or {"_target_": OLD_MODULES.get(target, "")})
    loader = dict(new.get("loader") or {})
    for key, value in old.items():
        where = RENAMED.get(key)
        if where is None:
            continue
        if key == "max_duration" and value is not None:  # seconds -> feature frames at the front end's hop
            hop_ms = (old.get("frontend") or {}).get("hop_ms", 10.0)
            value = round(value * 1000 / hop_ms)
        group, _, name = where.rpartition(".")
        {"loader": loader, "modality": modality, "": new}[group][name] = value
    new["_target_"] = "attend.data.DataModule"
    new["modality"], new["loader"] = modality, loader
    source = new.get("source")
    if isinstance(source, dict):
        caching = str(source.get("_target_", "")).rpartition(".")[2] in CACHING_SOURCES
        new["source"] = {RENAMED_SOURCE.get(key, key): value for key, value in source.items()
                         if not (caching and key == "cache_dir")}
    return OmegaConf.create(new)
