import math

import pytest
import torch

from attend.data.audio.features import LogMelFrontEnd, SpecAugment


def noise(seconds: float = 1.0, seed: int = 0) -> torch.Tensor:
    return torch.randn(int(16000 * seconds), generator=torch.Generator().manual_seed(seed))


def test_frames_of_one_second():
    """Kaldi framing (snip_edges): 1 + (16000 - 400) // 160 = 98 frames of 80 mels."""
    front_end = LogMelFrontEnd()
    features = front_end(noise())
    assert features.shape == (98, 80) == (front_end.num_frames(16000), front_end.n_mels)
    assert features.dtype == torch.float32
    assert front_end.hop_seconds == pytest.approx(0.01)
    assert (front_end.win_length, front_end.hop_length, front_end.n_fft) == (400, 160, 512)


@pytest.mark.parametrize("samples", [400, 401, 559, 560, 1234, 8000])
def test_num_frames_is_what_forward_returns(samples):
    front_end = LogMelFrontEnd(n_mels=40)
    assert front_end(noise()[:samples]).shape == (front_end.num_frames(samples), 40)


def test_shorter_than_a_window_is_a_clear_error():
    front_end = LogMelFrontEnd()
    assert front_end.num_frames(399) == 0
    with pytest.raises(ValueError, match="at least 400 samples"):
        front_end(noise()[:399])


def test_cmvn_per_bin():
    waveform = noise() * torch.linspace(0.1, 2.0, 16000)  # louder over time
    features = LogMelFrontEnd()(waveform)
    torch.testing.assert_close(features.mean(dim=0), torch.zeros(80), atol=1e-4, rtol=0)
    torch.testing.assert_close(features.std(dim=0, unbiased=False), torch.ones(80), atol=1e-3, rtol=0)


def test_tone_peaks_in_its_mel_bin():
    """HTK mel: 440 Hz is 549.6 mel; 80 filters centred every 2840/81 mel put it near filter 14.7."""
    time = torch.arange(16000) / 16000
    features = LogMelFrontEnd(normalize=False)(0.5 * torch.sin(2 * math.pi * 440 * time))
    expected = 2595 * math.log10(1 + 440 / 700) / (2595 * math.log10(1 + 8000 / 700) / 81) - 1
    assert abs(features.mean(dim=0).argmax().item() - expected) <= 1


def test_specaugment_masks_with_zeros_and_keeps_shape():
    torch.manual_seed(0)
    features = torch.randn(200, 80)
    augment = SpecAugment(freq_mask_param=15, time_mask_param=30)
    out = augment(features)
    assert out.shape == features.shape
    zero_bins = (out == 0).all(dim=0)  # (n_mels,)
    zero_frames = (out == 0).all(dim=1)  # (frames,)
    assert zero_bins.any() and zero_frames.any()
    kept = out != 0
    torch.testing.assert_close(out[kept], features[kept])  # everything else untouched
    assert not torch.equal(out, augment(features))  # a fresh draw every call


def test_specaugment_time_masks_respect_max_time_ratio():
    """Each time mask is shorter than max_time_ratio of the utterance, even with a large time_mask_param."""
    torch.manual_seed(0)
    augment = SpecAugment(num_freq_masks=0, time_mask_param=1000, num_time_masks=1, max_time_ratio=0.2)
    widths = [int((augment(torch.ones(100, 8)) == 0).all(dim=1).sum()) for _ in range(300)]
    assert max(widths) < 20 and max(widths) >= 10
    assert SpecAugment(num_freq_masks=0)(torch.ones(4, 8)).eq(1).all()  # 0.2 * 4 frames: no time mask
