"""Options that were renamed, and classes that moved: the data options renamed when the three data modules became
one (issue 25) and the harness's classes that moved out of ``attend.run`` into their rooms (issue 40). A user's
config that still spells one the old way is refused at start-up with the new name (``renamed_options``,
``moved_targets``), and the config saved in an older checkpoint is rewritten to today's form (``upgrade_config``),
so that checkpoint still evaluates."""

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
MOVED_TARGETS = {  # a config's _target_ before the harness moved into rooms -> today's
    "attend.run.checkpoint_io.AtomicCheckpointIO": "attend.checkpoints.files.AtomicCheckpointIO",
    "attend.run.preemption.Preemption": "attend.callbacks.preemption.Preemption",
    "attend.run.optuna_pruning.OptunaPruning": "attend.callbacks.optuna_pruning.OptunaPruning",
    "attend.run.wandb_run.WandbRunInCheckpoint": "attend.callbacks.wandb_run_id.WandbRunInCheckpoint",
    "attend.run.resume.ResumePosition": "attend.callbacks.resume_position.ResumePosition",
    "attend.run.loggers.TensorBoardLogger": "attend.loggers.tensorboard_run.TensorBoardLogger",
    "attend.run.loggers.WandbLogger": "attend.loggers.wandb_run.WandbLogger",
}


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


def moved_targets(config: DictConfig) -> list[str]:
    """One message per ``_target_`` of ``config`` (at any depth) that names a class where it used to be."""
    container = OmegaConf.to_container(config, resolve=False)
    return [f"{key}={old} is now {MOVED_TARGETS[old]}" for key, old in targets(container) if old in MOVED_TARGETS]


def targets(value: Any, key: str = "") -> list[tuple[str, str]]:
    """(dotted key, class) of every ``_target_`` in a config container."""
    if isinstance(value, list):
        return [found for i, item in enumerate(value) for found in targets(item, f"{key}[{i}]")]
    if not isinstance(value, dict):
        return []
    found = [(f"{key}._target_".lstrip("."), value["_target_"])] if isinstance(value.get("_target_"), str) else []
    return found + [hit for name, item in value.items() for hit in targets(item, f"{key}.{name}".lstrip("."))]


def with_moved_targets(value: Any) -> Any:
    """A config container with every moved ``_target_`` named where it lives today."""
    if isinstance(value, list):
        return [with_moved_targets(item) for item in value]
    if not isinstance(value, dict):
        return value
    return {name: MOVED_TARGETS.get(item, item) if name == "_target_" and isinstance(item, str)
            else with_moved_targets(item) for name, item in value.items()}


def upgrade_config(config: DictConfig) -> DictConfig:
    """A run config saved by an older Attend in today's form: its data options renamed (``upgrade``) and its moved
    classes named where they are now; a current config comes back equal."""
    container: Any = with_moved_targets(OmegaConf.to_container(config, resolve=False))
    upgraded = OmegaConf.create(container)
    if "data" in upgraded:
        upgraded.data = upgrade(upgraded.data)
    return upgraded


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
