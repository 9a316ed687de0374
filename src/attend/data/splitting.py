"""Seeded train/val/test splits: of sentence pairs (no val or test sentence elsewhere) and of keyed records."""

from __future__ import annotations

import difflib
import random
from typing import TypeVar

Pair = tuple[str, str]
Keyed = TypeVar("Keyed")  # any record with a ``key`` (an image, an utterance)
SPLITS = ("train", "val", "test")


def split_by_key(records: list[Keyed], n_val: int, n_test: int, seed: int, what: str, unit: str = "records",
                 error: type[Exception] = ValueError) -> dict[str, list[Keyed]]:
    """Seeded split into exactly n_test test, n_val val and the rest train, each sorted by ``key``; ``error``, naming
    ``what`` (where they come from) and ``unit`` (what they are), when no training record would be left."""
    if n_val < 0 or n_test < 0:
        raise ValueError(f"n_val={n_val} and n_test={n_test} must be >= 0")
    if n_val + n_test >= len(records):
        raise error(f"{what} has only {len(records)} {unit}: n_val={n_val} + n_test={n_test} leaves none to train "
                    "on; lower data.source.n_val / data.source.n_test")
    shuffled = sorted(records, key=lambda r: r.key)
    random.Random(seed).shuffle(shuffled)
    test, val, train = shuffled[:n_test], shuffled[n_test : n_test + n_val], shuffled[n_test + n_val :]
    return {name: sorted(part, key=lambda r: r.key) for name, part in zip(SPLITS, (train, val, test), strict=True)}


def connected_groups(count: int, links) -> list[list[int]]:
    """The indices 0..count-1 grouped so that each (i, j) of ``links`` is in one group (union-find), in order of
    their first member."""
    parent = list(range(count))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in links:
        parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(count):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _components(pairs: list[Pair]) -> list[list[int]]:
    """Indices of pairs grouped so pairs sharing a source or a target text are together."""
    first_seen: dict[tuple[int, str], int] = {}
    links = [(i, first_seen.setdefault(key, i)) for i, (src, tgt) in enumerate(pairs) for key in ((0, src), (1, tgt))]
    return connected_groups(len(pairs), links)


def near_duplicate_groups(texts: list[str], threshold: float = 0.8) -> list[list[int]]:
    """Indices of ``texts`` grouped so that two texts at least ``threshold`` alike (difflib's ratio of matching
    characters, 1.0 = equal) are in one group, and so are their near duplicates in turn: "the conference is now
    locked" and "... unlocked" (0.98) share a split, so a test prompt is never one word away from a training one."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    links = []
    for a, i in enumerate(order):
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(texts[i])
        for j in order[a + 1 :]:
            if 2 * len(texts[i]) < threshold * (len(texts[i]) + len(texts[j])):
                break  # longer texts cannot reach the threshold: ratio <= 2 * shorter / (both lengths)
            matcher.set_seq1(texts[j])
            if matcher.real_quick_ratio() >= threshold and matcher.quick_ratio() >= threshold \
                    and matcher.ratio() >= threshold:
                links.append((i, j))
    return connected_groups(len(texts), links)


def disjoint_split(pairs: list[Pair], n_val: int, n_test: int, seed: int) -> dict[str, list[Pair]]:
    """Exactly ``n_test`` and ``n_val`` pairs (when possible) drawn at random, the rest train; pairs that share a
    source or target text stay in one split, so a val/test sentence is never seen in training, on either side."""
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
