"""Data modules for tests, built the way the configs build them: one ``DataModule`` with the modality's plug-in.
Loader options (batch_size, max_tokens, ...) may be given flat; they go into ``loader``."""

from __future__ import annotations

from typing import Any

from attend.data import (
    AudioModality,
    CharTokenizer,
    DataModule,
    ImageModality,
    LogMelFrontEnd,
    TextModality,
    WordTokenizer,
)

LOADER_OPTIONS = {"batch_size", "eval_batch_size", "max_tokens", "num_workers", "bucket"}


def datamodule(source, modality, tokenizer, **options: Any) -> DataModule:
    loader = {key: options.pop(key) for key in list(options) if key in LOADER_OPTIONS}
    options.setdefault("prepare_workers", 0)
    return DataModule(source, modality, tokenizer, loader=loader, **options)


def text_datamodule(source, src_tokenizer=None, tgt_tokenizer=None, **options: Any) -> DataModule:
    modality = TextModality(src_tokenizer or WordTokenizer())
    return datamodule(source, modality, tgt_tokenizer or WordTokenizer(), **options)


def caption_datamodule(source, tokenizer=None, image_size: int = 32, augment: bool = False, hflip: bool = False,
                       precompute_features: bool = True, feature_crops: int = 0, **options: Any) -> DataModule:
    modality = ImageModality(image_size, augment=augment, hflip=hflip, precompute_features=precompute_features,
                             feature_crops=feature_crops)
    return datamodule(source, modality, tokenizer or WordTokenizer(lowercase=True), **options)


def speech_datamodule(source, tokenizer=None, frontend=None, spec_augment=None, precompute: bool = True,
                      speed_perturb: list[float] | None = None, **options: Any) -> DataModule:
    modality = AudioModality(frontend or LogMelFrontEnd(n_mels=40), spec_augment=spec_augment, precompute=precompute,
                             speed_perturb=speed_perturb)
    return datamodule(source, modality, tokenizer or CharTokenizer(lowercase=True), **options)
