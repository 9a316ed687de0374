"""Whisper's own log-mel features of ONE utterance (openai-whisper's ``log_mel_spectrogram``), for encoder=whisper."""

from __future__ import annotations

from importlib.metadata import version

from torch import Tensor, nn

SAMPLE_RATE, N_FFT, HOP = 16000, 400, 160  # Whisper's: 25 ms windows every 10 ms at 16 kHz
WHISPER_MELS = (80, 128)  # the filter banks openai-whisper ships (tiny.en reads 80)


class WhisperLogMel(nn.Module):
    """Waveform (samples,) at 16 kHz -> Whisper's log-mel features (frames, n_mels), float32, as its encoder was
    trained on: a centred 400-point STFT (Hann window) every 160 samples, the last frame dropped (``samples // 160``
    frames), Slaney mel filters, ``log10(max(power, 1e-10))`` clamped at the utterance's maximum minus 8, then
    ``(x + 4) / 4``. No per-utterance normalisation, no padding to 30 s. Computed by openai-whisper itself.

    Audio at other rates (Asterisk's 8 kHz, 11.025 kHz files) is resampled to 16 kHz by ``read_audio`` first; the
    band above the recording's Nyquist frequency then holds only the resampler's noise near the log floor.

    It takes ``LogMelFrontEnd``'s options so that it can replace one in a config (conf/frontend/whisper.yaml sets
    every one); each must be Whisper's value (ValueError otherwise): ``sample_rate`` 16000, ``n_mels`` 80 (or 128),
    ``window_ms`` 25, ``hop_ms`` 10, ``n_fft`` 400 (or null), ``normalize`` false. Shorter than a window (400
    samples): ``num_frames`` gives 0 and ``forward`` raises ValueError."""

    def __init__(self, sample_rate: int = SAMPLE_RATE, n_mels: int = 80, window_ms: float = 25.0, hop_ms: float = 10.0,
                 n_fft: int | None = N_FFT, normalize: bool = False) -> None:
        super().__init__()
        given = {"sample_rate": sample_rate, "window_ms": window_ms, "hop_ms": hop_ms, "n_fft": n_fft or N_FFT,
                 "normalize": normalize}
        whisper = {"sample_rate": SAMPLE_RATE, "window_ms": 25.0, "hop_ms": 10.0, "n_fft": N_FFT, "normalize": False}
        wrong = [f"{key}={given[key]} (Whisper's: {value})" for key, value in whisper.items() if given[key] != value]
        if n_mels not in WHISPER_MELS:
            wrong.append(f"n_mels={n_mels} (Whisper's: 80, or 128 for large-v3)")
        if wrong:
            raise ValueError(f"attend.data.WhisperLogMel computes Whisper's fixed features; data.modality.frontend has "
                             f"{', '.join(wrong)}: drop those options or use frontend=whisper")
        self.sample_rate = SAMPLE_RATE
        self.n_mels = n_mels
        self.win_length = N_FFT
        self.hop_length = HOP

    def settings(self) -> dict:
        """Everything that shapes the features (the key of cached features), with the library's version."""
        return {"whisper_log_mel": version("openai-whisper"), "sample_rate": self.sample_rate, "n_mels": self.n_mels}

    @property
    def hop_seconds(self) -> float:
        return self.hop_length / self.sample_rate

    def num_frames(self, num_samples: int) -> int:
        """Number of frames ``forward`` returns for ``num_samples`` samples (0 when shorter than a window)."""
        return 0 if num_samples < self.win_length else num_samples // self.hop_length

    def forward(self, waveform: Tensor) -> Tensor:
        """(samples,) -> (frames, n_mels) float32."""
        from whisper.audio import log_mel_spectrogram  # openai-whisper, imported when Whisper features are computed

        if waveform.dim() != 1:
            raise ValueError(f"expected one utterance as a 1-D waveform (samples,), got shape {tuple(waveform.shape)}")
        if waveform.numel() < self.win_length:
            raise ValueError(f"utterance of {waveform.numel()} samples is shorter than one analysis window: it needs "
                             f"at least {self.win_length} samples (25 ms at 16 kHz); filter such utterances with "
                             "num_frames(samples) == 0")
        return log_mel_spectrogram(waveform.float(), n_mels=self.n_mels).transpose(0, 1).contiguous()  # (N, F)
