"""The audio plug-in: log-mel features of each utterance, computed once into the encoded store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch import Tensor, nn

from attend.data.audio.features import Spectrogram
from attend.data.audio.record import AudioReadError, Utterance, audio_duration, read_audio
from attend.data.modality import Modality, file_skip, path_or_none, strings
from attend.data.store import ExampleStore


class AudioModality(Modality):
    """Records are ``Utterance``s; ``frontend`` (``LogMelFrontEnd``) turns each into (frames, n_mels) features, the
    frame count being the source size. ``precompute``: the features are stored once (float16), else only the
    durations, and each step reads the audio. ``spec_augment`` masks training features. Unreadable audio is a skip."""

    name = "audio"
    unit = example_unit = "utterances"
    shard_size = 256  # utterances an encoded shard: ~65 MB of LibriSpeech features
    read_error = AudioReadError
    source_unit = "frames"

    def __init__(self, frontend: nn.Module, spec_augment: nn.Module | None = None, precompute: bool = True) -> None:
        self.frontend = frontend
        self.spec_augment = spec_augment
        self.precompute = precompute

    def settings(self) -> dict[str, Any]:
        return {"frontend": self.frontend.settings(), "precompute": self.precompute}

    def record_columns(self, utterances: list[Utterance]) -> dict[str, Any]:
        return {
            "key": strings([u.key for u in utterances]),
            "path": strings([path_or_none(u.path) for u in utterances]),
            "references": pa.array([[u.text] for u in utterances], type=pa.list_(pa.string())),
            "duration": pa.array([u.duration for u in utterances], type=pa.float64()),
            "speaker": strings([u.speaker for u in utterances]),
        }

    def encode(self, records: ExampleStore, rows: list[int]) -> tuple[dict[str, Any], list]:
        kept, values, sizes, skipped = [], [], [], []
        with one_thread():
            for row in rows:
                path = records.value("path", row)
                try:
                    if self.precompute:
                        features = compute_features(self.frontend, path).to(torch.float16).contiguous()  # (N, F)
                        values.append(features.numpy().tobytes())
                        sizes.append(features.size(0))
                    else:  # the header even where the source knows the duration: unreadable is a skip, not a crash
                        seconds = audio_duration(path)
                        sizes.append(self.frontend.num_frames(int(seconds * self.frontend.sample_rate)))
                except AudioReadError as problem:
                    skipped.append(file_skip(path, records.value("key", row), problem, "corrupt audio"))
                    continue
                kept.append(row)
        columns = {"row": kept, "source_size": pa.array(sizes, type=pa.int32())}
        if self.precompute:
            columns["features"] = pa.array(values, type=pa.binary())
        return columns, skipped

    def example(self, encoded: ExampleStore, row: int, records: ExampleStore, record_row: int, train: bool
                ) -> dict[str, Any]:
        if self.precompute:
            half = np.frombuffer(encoded.buffer("features", row), dtype=np.float16)
            features = torch.from_numpy(half.astype(np.float32)).view(-1, self.frontend.n_mels)  # (N, F), a copy
        else:
            features = compute_features(self.frontend, records.value("path", record_row))
        if train and self.spec_augment is not None:
            features = self.spec_augment(features)
        return {"src": features}

    def encoder_kwargs(self) -> dict[str, int]:
        return {"input_dim": self.frontend.n_mels}

    def readable_source(self, batch: dict[str, Any], index: int) -> Spectrogram:
        """Its log-mel features, (n_mels, frames) without padding."""
        length = int(batch["src_lengths"][index])
        return Spectrogram(batch["src"][index, :length].float().cpu().numpy().T, self.frontend.hop_seconds)

    def sources_to_examples(self, sources: list[str]) -> list[dict[str, Any]]:
        """Audio files; AudioReadError names an unreadable one."""
        return [{"src": compute_features(self.frontend, path)} for path in sources]


@torch.no_grad()
def compute_features(frontend: nn.Module, path: str) -> Tensor:
    """Log-mel features (frames, n_mels) of one audio file; AudioReadError for one unreadable or under a window."""
    waveform = read_audio(path, frontend.sample_rate)
    if frontend.num_frames(waveform.numel()) == 0:
        raise AudioReadError(
            f"{path}: {waveform.numel() / frontend.sample_rate * 1000:.1f} ms of audio is shorter than one "
            f"analysis window ({frontend.win_length / frontend.sample_rate * 1000:g} ms): nothing to recognise"
        )
    return frontend(waveform)


@contextmanager
def one_thread() -> Iterator[None]:
    """One torch thread while preparing: forked workers each take a core, and more threads would oversubscribe
    them; restored after, for a shard prepared in the main process."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
