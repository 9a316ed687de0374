"""Speech features of ONE utterance (no batch axis): log-mel filterbanks with per-utterance CMVN, computed once per
utterance into the store; SpecAugment masking, per training example; ``Spectrogram``, as a person reads them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchaudio.transforms import FrequencyMasking, MelSpectrogram, TimeMasking

LOG_FLOOR = 1e-6  # log(power + LOG_FLOOR): silence stays finite
CMVN_EPS = 1e-5  # std floor of the normalisation (a constant bin, a one-frame utterance)


@dataclass(frozen=True)
class Spectrogram:
    """One utterance's log-mel features, (n_mels, frames), and the hop in seconds: a speech source to read."""

    features: np.ndarray
    hop_seconds: float

    @property
    def seconds(self) -> float:
        return self.features.shape[1] * self.hop_seconds


class LogMelFrontEnd(nn.Module):
    """Waveform (samples,) -> log-mel features (frames, n_mels), float32.

    Kaldi's ``snip_edges`` framing: frame t covers samples ``[t*hop, t*hop + window)``, so ``frames = 1 + (samples -
    window) // hop`` (1 s at 16 kHz: 98); the window zero-padded to ``n_fft`` (next power of two). HTK mel filters,
    ``log(power + 1e-6)``; ``normalize``: per-utterance CMVN. Shorter than a window: ``num_frames`` gives 0 and
    ``forward`` raises ValueError."""

    def __init__(self, sample_rate: int = 16000, n_mels: int = 80, window_ms: float = 25.0, hop_ms: float = 10.0,
                 n_fft: int | None = None, normalize: bool = True) -> None:
        super().__init__()
        self.sample_rate = sample_rate
        self.n_mels = n_mels
        self.window_ms = window_ms
        self.hop_ms = hop_ms
        self.win_length = round(sample_rate * window_ms / 1000)
        self.hop_length = round(sample_rate * hop_ms / 1000)
        self.n_fft = n_fft or 2 ** math.ceil(math.log2(self.win_length))
        if self.n_fft < self.win_length:
            raise ValueError(f"n_fft ({self.n_fft}) must be at least the window ({self.win_length} samples)")
        self.normalize = normalize
        self.mel = MelSpectrogram(sample_rate=sample_rate, n_fft=self.n_fft, win_length=self.win_length,
                                  hop_length=self.hop_length, n_mels=n_mels, power=2.0, center=False)
        # torch.stft frames n_fft samples and centres the shorter window in them: padding the
        # waveform by that offset makes each window start at t*hop (zeros fall outside the window)
        self.left_pad = (self.n_fft - self.win_length) // 2
        self.right_pad = self.n_fft - self.win_length - self.left_pad

    def settings(self) -> dict:
        """Everything that shapes the features (the key of cached features)."""
        return {"sample_rate": self.sample_rate, "n_mels": self.n_mels, "window_ms": self.window_ms,
                "hop_ms": self.hop_ms, "n_fft": self.n_fft, "normalize": self.normalize}

    @property
    def hop_seconds(self) -> float:
        return self.hop_length / self.sample_rate

    def num_frames(self, num_samples: int) -> int:
        """Number of frames ``forward`` returns for ``num_samples`` samples (0 when shorter than a window)."""
        if num_samples < self.win_length:
            return 0
        return 1 + (num_samples - self.win_length) // self.hop_length

    def forward(self, waveform: Tensor) -> Tensor:
        """(samples,) -> (frames, n_mels) float32."""
        if waveform.dim() != 1:
            raise ValueError(f"expected one utterance as a 1-D waveform (samples,), got shape {tuple(waveform.shape)}")
        if waveform.numel() < self.win_length:
            raise ValueError(f"utterance of {waveform.numel()} samples is shorter than one analysis window: it needs "
                             f"at least {self.win_length} samples ({1000 * self.win_length / self.sample_rate:g} ms at "
                             f"{self.sample_rate} Hz); filter such utterances with num_frames(samples) == 0")
        padded = F.pad(waveform.float(), (self.left_pad, self.right_pad))  # (samples + n_fft - window,)
        power = self.mel(padded)  # (n_mels, frames)
        features = torch.log(power + LOG_FLOOR).transpose(0, 1)  # (frames, n_mels)
        if self.normalize:
            mean = features.mean(dim=0, keepdim=True)  # (1, n_mels)
            std = features.std(dim=0, unbiased=False, keepdim=True)  # (1, n_mels)
            features = (features - mean) / (std + CMVN_EPS)
        return features.contiguous()


class SpecAugment(nn.Module):
    """Frequency and time masking of one utterance's features (Park et al. 2019, sec. 2; no time warping):
    ``num_freq_masks`` bands of ``[0, freq_mask_param)`` mel bins and ``num_time_masks`` spans of ``[0,
    min(time_mask_param, max_time_ratio * frames))`` frames, at random, set to 0 (the mean after CMVN)."""

    def __init__(self, freq_mask_param: int = 27, num_freq_masks: int = 2, time_mask_param: int = 40,
                 num_time_masks: int = 2, max_time_ratio: float = 0.2) -> None:
        super().__init__()
        if not 0.0 <= max_time_ratio <= 1.0:
            raise ValueError(f"max_time_ratio must be in [0, 1], got {max_time_ratio}")
        self.freq_masks = nn.ModuleList(FrequencyMasking(freq_mask_param) for _ in range(num_freq_masks))
        self.time_masks = nn.ModuleList(TimeMasking(time_mask_param, p=max_time_ratio) for _ in range(num_time_masks))

    def forward(self, features: Tensor) -> Tensor:
        """(frames, n_mels) -> (frames, n_mels) with masked bands and spans set to 0."""
        if features.dim() != 2:
            raise ValueError(f"expected one utterance's features (frames, n_mels), got shape {tuple(features.shape)}")
        specgram = features.transpose(0, 1)  # (n_mels, frames): torchaudio's (freq, time)
        for mask in [*self.freq_masks, *self.time_masks]:
            specgram = mask(specgram, 0.0)
        return specgram.transpose(0, 1).contiguous()  # (frames, n_mels)
