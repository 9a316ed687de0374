"""Best-path CTC decoding: what the CTC head alone reads, without the attention decoder."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


def ctc_best_path(log_probs: Tensor, lengths: Tensor, blank: int, never: Sequence[int] = ()) -> list[list[int]]:
    """Token ids of each utterance: the most likely symbol of each of its ``lengths`` frames (B, S, V), repeats
    collapsed, blanks dropped. ``never`` (bos, eos: symbols CTC never learns to emit) is never chosen."""
    scores = log_probs.detach().float()
    if never:
        scores = scores.index_fill(-1, torch.tensor(list(never), device=scores.device), -torch.inf)
    best = scores.argmax(dim=-1)  # (B, S)
    previous = F.pad(best[:, :-1], (1, 0), value=blank)  # (B, S)
    valid = torch.arange(best.size(1), device=best.device) < lengths.unsqueeze(1)  # (B, S)
    emitted = (best != blank) & (best != previous) & valid  # (B, S)
    return [row[keep].tolist() for row, keep in zip(best.cpu(), emitted.cpu(), strict=True)]
