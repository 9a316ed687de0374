"""The audio plug-in: log-mel features of each utterance, computed once into the encoded store (and a frozen
encoder's outputs of them, ``attend.data.audio.frozen_features``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import torch
import torchaudio
from torch import Tensor, nn

from attend.data.audio.features import Spectrogram
from attend.data.audio.frozen_features import AudioFeatureExtractor, feature_store, stored_features
from attend.data.audio.record import AudioReadError, Utterance, audio_duration, read_audio
from attend.data.modality import Modality, file_skip, path_or_none, strings
from attend.data.store import ExampleStore, Shard, prepared_store

log = logging.getLogger("attend.data")


class AudioModality(Modality):
    """Records are ``Utterance``s; ``frontend`` (``LogMelFrontEnd``) turns each into (frames, n_mels) features, the
    frame count being the source size. ``precompute``: the features are stored once (float16), else only the
    durations, and each step reads the audio. ``spec_augment`` masks training features. Unreadable audio is a skip.
    ``speed_perturb`` (e.g. [0.9, 1.0, 1.1]; Ko et al. 2015): each training example is one of these speeds, drawn
    each time it is read; the training split's other speeds are stored once beside its features
    (``speed_perturbed`` store), or made on the fly without ``precompute``. ``precompute_features``: a frozen encoder
    part (encoder=whisper) runs once per utterance and speed into a feature store, whose outputs are batched as
    ``src`` (evaluation batches add each utterance's ``spectrogram`` for the plots); SpecAugment then masks those
    outputs (spans of positions, bands of their channels) each time a training example is read, and speed
    perturbation stores each speed's outputs."""

    name = "audio"
    unit = example_unit = "utterances"
    shard_size = 256  # utterances an encoded shard: ~65 MB of LibriSpeech features
    read_error = AudioReadError
    source_unit = "frames"

    def __init__(self, frontend: nn.Module, spec_augment: nn.Module | None = None, precompute: bool = True,
                 speed_perturb: list[float] | None = None, precompute_features: bool = True) -> None:
        self.frontend = frontend
        self.spec_augment = spec_augment
        self.precompute = precompute
        self.speeds = check_speeds(speed_perturb)
        self.perturbed: dict[str, ExampleStore] = {}  # training encoded store's folder name -> its other speeds
        self.precompute_features = precompute_features
        self.extractor: AudioFeatureExtractor | None = None
        self.features: dict[str, ExampleStore] = {}  # encoded store's folder name -> the frozen encoder's outputs

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
        speed = self.speeds[int(torch.randint(len(self.speeds), ()))] if train and self.speeds else 1.0
        stored = self.features.get(encoded.folder.name)
        if stored is not None:  # the frozen encoder's outputs (S, D); the plots read the spectrogram
            example: dict[str, Any] = {"src": stored_features(stored, row, speed)}
            if train and self.spec_augment is not None:  # masks in the stored outputs' space: (S, D), not (N, F)
                example["src"] = self.spec_augment(example["src"])
            if not train:
                frames = self.frames(encoded, row, records, record_row)
                example["spectrogram"] = frames.numpy().T  # (n_mels, N): an array, which the batch keeps as a list
            return example
        features = self.frames(encoded, row, records, record_row, speed)
        if train and self.spec_augment is not None:
            features = self.spec_augment(features)
        return {"src": features}

    def frames(self, encoded: ExampleStore, row: int, records: ExampleStore, record_row: int, speed: float = 1.0
               ) -> Tensor:
        """One utterance's features (N, F) at ``speed``: from the stores, or computed from its audio."""
        if not self.precompute:
            return compute_features(self.frontend, records.value("path", record_row), speed)
        perturbed = self.perturbed.get(encoded.folder.name)
        store, column = (encoded, "features") if speed == 1.0 or perturbed is None else (perturbed, f"{speed:g}")
        half = np.frombuffer(store.buffer(column, row), dtype=np.float16)
        return torch.from_numpy(half.astype(np.float32)).view(-1, self.frontend.n_mels)  # (N, F), a copy

    def prepare_split(self, encoded: ExampleStore, split: str, datamodule) -> None:
        """The training split's features at the other speeds, then a frozen encoder's outputs (once it is known)."""
        self.prepare_speeds(encoded, split, datamodule)
        self.prepare_features(encoded, split, datamodule)

    def prepare_speeds(self, encoded: ExampleStore, split: str, datamodule) -> None:
        """The training split's features at the other speeds, computed once into their own store."""
        others = [speed for speed in self.speeds if speed != 1.0]
        if split != "train" or not others or not self.precompute:
            return
        records = datamodule.records[split]

        def at_speed(row: int, speed: float) -> bytes:
            try:
                features = compute_features(self.frontend, records.value("path", int(encoded.value("row", row))), speed)
            except AudioReadError:  # too short to read faster (under a window at 1.1): kept at its own speed
                return bytes(encoded.buffer("features", row))
            return features.to(torch.float16).numpy().tobytes()

        def prepare(rows: list[int], first: int) -> Shard:
            with one_thread():
                return Shard({f"{speed:g}": pa.array([at_speed(row, speed) for row in rows], type=pa.binary())
                              for speed in others})

        folder = datamodule.store_folder("speed_perturbed", encoded.folder.name, others)
        self.perturbed[encoded.folder.name] = prepared_store(
            folder, range(len(encoded)), prepare, shard_size=self.shard_size, workers=datamodule.prepare_workers,
            describe=f"{split} {self.unit} at speeds {', '.join(f'{s:g}' for s in others)}")

    def use_frozen_features(self, extractor: AudioFeatureExtractor, datamodule) -> None:
        """Store the frozen part's outputs of every split once (unless ``precompute_features`` is off) and batch them
        as ``src``; refused when the front end is not the one the encoder reads."""
        expected, actual = getattr(extractor, "frontend", None), type(self.frontend).__name__
        if expected and expected != actual:
            raise ValueError(f"the encoder reads {expected} features but data.modality.frontend is {actual}: use "
                             f"{expected} (encoder=whisper: add frontend=whisper to the command line)")
        if not self.precompute_features:
            return
        self.extractor = extractor
        for split, encoded in datamodule.encoded.items():
            self.prepare_features(encoded, split, datamodule)

    def prepare_features(self, encoded: ExampleStore, split: str, datamodule) -> None:
        """The split's store of the frozen part's outputs (training: at every speed), when there is an extractor."""
        if self.extractor is None:
            return
        speeds = sorted({1.0, *self.speeds}) if split == "train" else [1.0]
        records = datamodule.records[split]
        record_rows = encoded.column("row").astype(np.int64)

        def outputs_of(row: int, speed: float) -> Tensor:
            with one_thread():  # one thread a worker process, as the log-mel features are prepared
                return extractor(self.frames(encoded, row, records, int(record_rows[row]), speed))

        extractor = self.extractor
        folder = datamodule.store_folder("audio_features", encoded.folder.name, extractor.key, speeds)
        log.info("frozen encoder outputs of the %s split: %s", split, extractor.key)
        self.features[encoded.folder.name] = feature_store(
            len(encoded), outputs_of, speeds, folder, datamodule.shard_size or self.shard_size,
            workers_for(extractor, datamodule.prepare_workers), f"{split} {self.unit} through {self.extractor.key}")

    def encoder_kwargs(self) -> dict[str, int]:
        return {"input_dim": self.frontend.n_mels}

    def readable_source(self, batch: dict[str, Any], index: int) -> Spectrogram:
        """Its log-mel features, (n_mels, frames) without padding (with a frozen encoder's outputs as ``src``, the
        ``spectrogram`` evaluation batches carry)."""
        if "spectrogram" in batch:
            return Spectrogram(batch["spectrogram"][index], self.frontend.hop_seconds)
        length = int(batch["src_lengths"][index])
        return Spectrogram(batch["src"][index, :length].float().cpu().numpy().T, self.frontend.hop_seconds)

    def sources_to_examples(self, sources: list[str]) -> list[dict[str, Any]]:
        """Audio files; AudioReadError names an unreadable one."""
        return [{"src": compute_features(self.frontend, path)} for path in sources]


def workers_for(extractor: AudioFeatureExtractor, workers: int) -> int:
    """Forked worker processes for an extractor on the CPU; none on a GPU (CUDA does not survive a fork, and one
    process keeps the GPU busy)."""
    device = getattr(extractor, "device", None)
    return workers if device is None or torch.device(device).type == "cpu" else 0


def check_speeds(speeds: list[float] | None) -> list[float]:
    """The speed factors of ``speed_perturb``, refused unless each is a positive number."""
    speeds = [float(speed) for speed in speeds or []]
    if any(not 0.0 < speed <= 4.0 for speed in speeds):
        raise ValueError(f"data.modality.speed_perturb {speeds}: each speed must be in (0, 4], like [0.9, 1.0, 1.1]")
    return speeds


def change_speed(waveform: Tensor, speed: float) -> Tensor:
    """The waveform played ``speed`` times as fast (pitch moves with it), by resampling: ``speed`` 1.1 gives 1/1.1
    as many samples. Read as if it were recorded at ``speed`` x the rate (in hundredths, so the polyphase
    resampler's filters stay short), then resampled to the rate."""
    if speed == 1.0:
        return waveform
    return torchaudio.functional.resample(waveform, orig_freq=round(100 * speed), new_freq=100)


@torch.no_grad()
def compute_features(frontend: nn.Module, path: str, speed: float = 1.0) -> Tensor:
    """Log-mel features (frames, n_mels) of one audio file at ``speed``; AudioReadError for one unreadable, under a
    window or whose features are not finite."""
    waveform = change_speed(read_audio(path, frontend.sample_rate), speed)
    if frontend.num_frames(waveform.numel()) == 0:
        raise AudioReadError(
            f"{path}: {waveform.numel() / frontend.sample_rate * 1000:.1f} ms of audio is shorter than one "
            f"analysis window ({frontend.win_length / frontend.sample_rate * 1000:g} ms): nothing to recognise"
        )
    features = frontend(waveform)
    if not torch.isfinite(features).all():  # samples so large (a float file's garbage) that their power overflows
        raise AudioReadError(f"{path}: its log-mel features are not finite (samples far outside [-1, 1]); re-create "
                             "it or remove it from the data set")
    return features


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
