"""Log-mel features of a whole split computed once and cached on disk, keyed by source and front end."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from attend.data.audio import AudioReadError, Utterance
from attend.data.audio.dataset import compute_features
from attend.data.bad_samples import BadSamples
from attend.data.cache import cache_file, cached_skips, load_or_rebuild, read_each, replay_skips, save_atomic


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
    under ``cache_dir/speech_features``; a cached read reports the same skips again, and a truncated or
    corrupt cache file is rebuilt with a warning (``load_or_rebuild``).
    """
    if not utterances:
        return [], []
    path = None
    if cache_dir is not None:
        path = cache_file(cache_dir, "speech_features", source, frontend.settings(), [u.key for u in utterances])

    def load(path: Path) -> dict:
        cached = torch.load(path, weights_only=True)  # truncated or overwritten: it raises
        return {"features": cached["features"], "kept": cached["kept"], "skipped": cached_skips(cached, utterances)}

    def build() -> dict:
        read = lambda utterance: compute_features(frontend, utterance.path).to(torch.float16)
        features, kept, skipped = read_each(
            utterances, read, AudioReadError, "utterance", bad_samples, split, corrupt="corrupt audio"
        )
        return {"features": features, "kept": kept, "skipped": skipped}

    replay = lambda cached: replay_skips(bad_samples, split, cached["skipped"], len(utterances), "utterance")
    loaded = load_or_rebuild(path, load, build, save_atomic, on_cached=replay)
    return loaded["features"], loaded["kept"]
