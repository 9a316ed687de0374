"""Seeded train/val/test splits in which no sentence of val or test appears in another split."""

from __future__ import annotations

import random

Pair = tuple[str, str]


def _components(pairs: list[Pair]) -> list[list[int]]:
    """Indices of pairs grouped so pairs sharing a source or a target text are together."""
    parent = list(range(len(pairs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_seen: dict[tuple[int, str], int] = {}
    for i, (src, tgt) in enumerate(pairs):
        for key in ((0, src), (1, tgt)):
            j = first_seen.setdefault(key, i)
            parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def disjoint_split(pairs: list[Pair], n_val: int, n_test: int, seed: int) -> dict[str, list[Pair]]:
    """Exactly ``n_test`` and ``n_val`` pairs (when possible) drawn at random; the rest is train.

    Pairs that share a source or target text stay in one split, so a val/test sentence is never
    seen in training, on either side.
    """
    if n_val + n_test >= len(pairs):
        raise ValueError(f"n_val + n_test = {n_val + n_test} leaves no training pairs of {len(pairs)}")
    groups = _components(pairs)
    random.Random(seed).shuffle(groups)
    chosen: dict[str, list[int]] = {"test": [], "val": [], "train": []}
    wanted = {"test": n_test, "val": n_val}
    for group in groups:
        split = next((s for s, n in wanted.items() if len(chosen[s]) + len(group) <= n), "train")
        chosen[split].extend(group)
    return {split: [pairs[i] for i in sorted(idx)] for split, idx in chosen.items()}
