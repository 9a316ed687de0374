"""Log-mel features of a whole split computed once and cached on disk, keyed by source and front end."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.data.audio import AudioReadError, Utterance
from attend.data.bad_samples import BadSamples
from attend.data.cache import cache_file, cached_skips, read_each, replay_skips, save_atomic
from attend.data.speech_dataset import compute_features


def load_features(
    source,
    utterances: list[Utterance],
    frontend: nn.Module,
    cache_dir: str | None,
    bad_samples: BadSamples | None = None,
    split: str = "data",
) -> tuple[list[Tensor], list[int]]:
    """float16 features (frames, n_mels) of the utterances whose audio could be read, and their indices.

    Unreadable audio (missing, corrupt, empty) goes to ``bad_samples``: skipped, named in a warning and
    counted (or DataError with on_error=raise). With ``cache_dir`` the result and its skips are saved
    under ``cache_dir/speech_features``; a cached read reports the same skips again.
    """
    if not utterances:
        return [], []
    path = None
    if cache_dir is not None:
        keys = [u.key for u in utterances]
        path = cache_file(cache_dir, "speech_features", source, frontend.settings(), keys)
        if path.is_file():
            cached = torch.load(path, weights_only=True)
            replay_skips(bad_samples, split, cached_skips(cached, utterances), len(utterances), "utterance")
            return cached["features"], cached["kept"]
    read = lambda utterance: compute_features(frontend, utterance.path).to(torch.float16)
    features, kept, skipped = read_each(
        utterances, read, AudioReadError, "utterance", bad_samples, split, corrupt="corrupt audio"
    )
    if path is not None:
        save_atomic({"features": features, "kept": kept, "skipped": skipped}, path)
    return features, kept
