"""Log-mel features of a whole split computed once and cached on disk, keyed by source and front end."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attend.data.audio import AudioReadError, Utterance
from attend.data.cache import cache_file, read_each, save_atomic
from attend.data.speech_dataset import compute_features


def load_features(
    source, utterances: list[Utterance], frontend: nn.Module, cache_dir: str | None
) -> tuple[list[Tensor], list[int]]:
    """float16 features (frames, n_mels) of the utterances whose audio could be read, and their indices.

    Unreadable audio (missing, corrupt, empty) is skipped, each named in a warning, and counted.
    With ``cache_dir`` the result is saved under ``cache_dir/speech_features`` and read back next time.
    """
    if not utterances:
        return [], []
    path = None
    if cache_dir is not None:
        keys = [u.key for u in utterances]
        path = cache_file(cache_dir, "speech_features", source, frontend.settings(), keys)
        if path.is_file():
            cached = torch.load(path, weights_only=True)
            return cached["features"], cached["kept"]
    read = lambda utterance: compute_features(frontend, utterance.path).to(torch.float16)
    features, kept = read_each(utterances, read, AudioReadError, "utterance")
    if path is not None:
        save_atomic({"features": features, "kept": kept}, path)
    return features, kept
