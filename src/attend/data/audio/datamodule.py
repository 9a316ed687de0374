"""The LightningDataModule for speech recognition: audio -> log-mel features -> Memory, transcripts -> characters."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any

from torch import nn

from attend.data.audio import Utterance
from attend.data.audio.dataset import SpeechCollate, SpeechDataset, StoredFeatures, compute_features
from attend.data.audio.feature_store import duration_store, feature_store, report_skips
from attend.data.audio.features import Spectrogram
from attend.data.base import TargetTextDataModule
from attend.data.store import ExampleStore, file_stamp
from attend.data.tokenizers.tokenizer import Tokenizer

log = logging.getLogger("attend.data")


def with_duration(utterance: Utterance, header_seconds: float) -> Utterance:
    """The utterance with its duration: the source's, else the header's (read once, into the durations store,
    so a missing or corrupt file is skipped at start-up rather than failing mid-epoch)."""
    return replace(utterance, duration=utterance.duration if utterance.duration is not None else header_seconds)


class SpeechDataModule(TargetTextDataModule):
    """Utterances from ``source`` (``splits()``), features from ``frontend``, transcripts tokenized by
    ``tokenizer`` (characters by default, fitted on training transcripts).

    Batches hold utterances of similar duration (at most ``batch_size`` of them and at most
    ``max_frames`` padded feature frames). Unreadable audio, and training utterances longer than
    ``max_duration`` seconds, with an empty transcript or one over ``max_transcript_chars`` characters,
    are bad samples: skipped and counted (``on_error``, ``max_skip_fraction``); SpecAugment
    (``spec_augment``, null for none) masks training features. With ``precompute`` the features of
    every split are computed once by ``prepare_workers`` processes into a memory-mapped store in
    ``cache_dir`` (on disk, not in RAM); without, each step reads the audio, and only the durations
    (from the audio headers) are prepared once.
    Batches: ``src`` (B, N, n_mels), ``src_lengths`` (B,), ``tgt`` (B, T), ``ids``, ``sources`` (keys),
    ``references`` (transcripts).
    """

    modality = "audio"

    def __init__(
        self,
        source,
        tokenizer: Tokenizer,
        frontend: nn.Module,
        spec_augment: nn.Module | None = None,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        max_frames: int | None = None,
        max_duration: float | None = 20.0,
        max_transcript_chars: int = 400,
        precompute: bool = True,
        num_workers: int = 0,
        seed: int = 1234,
        cache_dir: str | os.PathLike | None = None,
        on_error: str = "skip",
        max_skip_fraction: float = 0.1,
        prepare_workers: int | None = None,
    ) -> None:
        super().__init__(
            source, tokenizer, batch_size, eval_batch_size, num_workers, seed, cache_dir, max_tokens=max_frames,
            on_error=on_error, max_skip_fraction=max_skip_fraction, prepare_workers=prepare_workers,
        )
        self.frontend = frontend
        self.spec_augment = spec_augment
        self.max_duration = max_duration
        self.max_transcript_chars = max_transcript_chars
        self.precompute = precompute
        # self.loaded: split -> (utterances, StoredFeatures or None)
        self.dropped: dict[str, int] = {}  # training utterances dropped, by reason

    # data ------------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Build the corpus (espeak-ng synthesis) and every split's store once (local rank 0): features with
        ``precompute``, else durations. Its skips are reported by setup, which opens the stores."""
        if self.prepared:
            return
        for utterances in self.source_splits().values():
            self._store(utterances)

    def setup(self, stage: str | None = None) -> None:
        """Read splits and features, filter training utterances, fit the tokenizer, tokenize (idempotent)."""
        if self.datasets:
            return
        self.loaded = {name: self._load(name, utterances) for name, utterances in self.source_splits().items()}
        self.loaded["train"] = self._filter_train(*self.loaded["train"])
        if not self.tokenizer.is_fitted:
            self.tokenizer.fit([u.text for u in self.loaded["train"][0]])
        self._encode_splits()
        log.info(
            "utterances: train %d, val %d, test %d; vocabulary %d",
            len(self.datasets["train"]), len(self.datasets["val"]), len(self.datasets["test"]),
            self.tokenizer.vocab_size,
        )
        self.bad_samples.log_summary()

    def _store(self, utterances: list[Utterance]) -> ExampleStore:
        """The split's feature store (``precompute``) or durations store, opened, or prepared when missing."""
        keys = [[u.key, file_stamp(u.path)] for u in utterances]  # a changed or restored file is read again
        if self.precompute:
            folder = self.store_folder("speech_features", self.frontend.settings(), keys)
            return feature_store(folder, utterances, self.frontend, self.prepare_workers)
        return duration_store(self.store_folder("speech_durations", keys), utterances, self.prepare_workers)

    def _load(self, split: str, utterances: list[Utterance]) -> tuple[list[Utterance], StoredFeatures | None]:
        """Utterances whose audio can be read, with their stored features when precomputed, else their durations."""
        store = self._store(utterances)
        report_skips(store, utterances, self.bad_samples, split)
        kept = store.column("index").tolist()
        if not self.precompute:
            seconds = store.column("duration").tolist()
            return [with_duration(utterances[i], s) for i, s in zip(kept, seconds, strict=True)], None
        return [utterances[i] for i in kept], StoredFeatures(store)

    def _duration(self, utterance: Utterance, frames: int | None) -> float:
        if frames is not None:
            return frames * self.frontend.hop_seconds
        return utterance.duration or 0.0

    def _filter_train(self, utterances: list[Utterance], features: StoredFeatures | None):
        """Training utterances that are too long or have no usable transcript are bad samples (skipped)."""
        def reason(utterance: Utterance, frames: int | None) -> tuple[str, str] | None:
            seconds = self._duration(utterance, frames)
            if self.max_duration is not None and seconds > self.max_duration:
                return f"over {self.max_duration} s", (
                    f"{seconds:.1f} s of audio, over data.max_duration={self.max_duration} (raise it to keep it)"
                )
            if not utterance.text.strip():
                return "empty transcript", "the transcript is empty"
            if len(utterance.text) > self.max_transcript_chars:
                return f"transcript over {self.max_transcript_chars} characters", (
                    f"a transcript of {len(utterance.text)} characters, over "
                    f"data.max_transcript_chars={self.max_transcript_chars} (raise it to keep it)"
                )
            return None

        self.bad_samples.begin("train", "length")
        keep = []
        self.dropped = {}
        for index, utterance in enumerate(utterances):
            why = reason(utterance, None if features is None else int(features.frames[index]))
            if why is None:
                keep.append(index)
                continue
            self.dropped[why[0]] = self.dropped.get(why[0], 0) + 1
            self.bad_samples.skip("train", "length", f"utterance {utterance.key} ({utterance.path})", *why)
        self.bad_samples.end("train", "length", len(utterances), "utterances")
        kept_features = None if features is None else features.subset(keep)
        return [utterances[i] for i in keep], kept_features

    def _encode_splits(self) -> None:
        for name, (utterances, features) in self.loaded.items():
            targets = [self.tokenizer.encode(u.text) for u in utterances]
            augment = self.spec_augment if name == "train" else None
            self.datasets[name] = SpeechDataset(utterances, targets, self.frontend, features, augment=augment)

    # what the model, the run's examples and prediction need -----------------------------------
    def encoder_kwargs(self) -> dict[str, int]:
        return {"input_dim": self.frontend.n_mels}

    def _collate(self) -> SpeechCollate:
        return SpeechCollate(self.tokenizer.pad_id, self.tokenizer.bos_id, self.tokenizer.eos_id)

    def readable_source(self, batch: dict[str, Any], index: int) -> Spectrogram:
        """The source of one batch row as a person reads it: its log-mel features, (n_mels, frames) without padding."""
        length = int(batch["src_lengths"][index])
        features = batch["src"][index, :length].float().cpu().numpy().T  # (F, N)
        return Spectrogram(features, self.frontend.hop_seconds)

    def batch_from_sources(self, sources: list[str]) -> dict[str, Any]:
        """A batch of audio files (transcription); raises AudioReadError naming an unreadable file."""
        examples = [
            {"features": compute_features(self.frontend, path), "tgt": [], "id": i, "source": path, "reference": ""}
            for i, path in enumerate(sources)
        ]
        return self._collate()(examples)
