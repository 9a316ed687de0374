"""A length-bucketing batch sampler that reshuffles per epoch and shards batches across ranks."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import BatchSampler, Sampler


class EpochCounter(Sampler[int]):
    """Holds the epoch for ``BucketBatchSampler``; Lightning calls ``batch_sampler.sampler.set_epoch``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.size))

    def __len__(self) -> int:
        return self.size


class BucketBatchSampler(BatchSampler):
    """Batches of similar length: sorted within random chunks, batch order shuffled per epoch.

    At most ``batch_size`` examples and ``max_tokens`` padded tokens (``len(batch) * max(lengths)``; a longer
    example goes alone) a batch; without ``shuffle`` (val/test) all sorted by length. ``drop_last`` drops batches of
    fewer than ``batch_size`` examples (without ``max_tokens``).

    Each of ``num_replicas`` ranks (default: from ``torch.distributed``) gets every ``num_replicas``-th batch. In
    training the batches of one optimizer step (``num_replicas`` x ``accumulation``, Lightning's
    accumulate_grad_batches) are neighbours in length, so the ranks finish their steps together, and one process
    accumulating over as many batches trains on the same batches in the same order as the ranks together.
    Training gives every rank as many batches (DDP needs it): some repeated, or with ``drop_last`` the surplus
    dropped. Evaluation scores every example once, halving the largest batches until every rank has one (an empty
    rank would leave the others waiting at the metrics' sync). An injected ``DistributedSampler`` (``sampler``) is
    only read for its rank, world size and epoch; ``set_epoch`` reshuffles.
    """

    def __init__(self, lengths: Sequence[int] | torch.Tensor, batch_size: int, max_tokens: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False, num_replicas: int | None = None,
                 rank: int | None = None, chunk_batches: int = 100, sampler: Sampler | None = None,
                 accumulation: int = 1) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        self.lengths = torch.as_tensor(lengths, dtype=torch.long).reshape(-1)
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.chunk_batches = chunk_batches
        self.accumulation = accumulation
        self.sampler = sampler if sampler is not None else EpochCounter(len(self.lengths))
        # a DistributedSampler injected by Lightning knows the rank and world size
        self._num_replicas = num_replicas if num_replicas is not None else getattr(sampler, "num_replicas", None)
        self._rank = rank if rank is not None else getattr(sampler, "rank", None)
        self._cache: tuple[tuple[int, int, int], list[list[int]]] | None = None
        self._skip = 0  # batches to leave out at the start of the next iteration (a resumed epoch)

    @property
    def epoch(self) -> int:
        return int(getattr(self.sampler, "epoch", 0))

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for ``epoch`` (same on every rank)."""
        self.sampler.set_epoch(epoch)

    @property
    def num_replicas(self) -> int:
        if self._num_replicas is not None:
            return self._num_replicas
        return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1

    @property
    def rank(self) -> int:
        if self._rank is not None:
            return self._rank
        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0

    def resume_after(self, batches: int) -> None:
        """Start the next iteration after the epoch's first ``batches`` batches (trained before a resume)."""
        self._skip = batches

    def __iter__(self) -> Iterator[list[int]]:
        # a generator: its body runs at the first batch, after on_train_epoch_start (where a resume calls resume_after)
        skip, self._skip = self._skip, 0
        yield from self._rank_batches()[skip:]

    def __len__(self) -> int:
        return len(self._rank_batches())

    def _rank_batches(self) -> list[list[int]]:
        key = (self.epoch, self.num_replicas, self.rank)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._shard(self._all_batches(self.epoch)))
        return self._cache[1]

    def _all_batches(self, epoch: int) -> list[list[int]]:
        """Every batch of ``epoch``, identical on all ranks."""
        if not self.shuffle:
            return self._pack(torch.argsort(self.lengths, stable=True))
        generator = torch.Generator().manual_seed(self.seed + epoch)
        order = torch.randperm(len(self.lengths), generator=generator)
        batches: list[list[int]] = []
        for chunk in order.split(self.batch_size * self.chunk_batches):
            batches += self._pack(chunk[torch.argsort(self.lengths[chunk], stable=True)])
        # shuffled in optimizer steps of neighbouring batches (similar lengths, from one sorted chunk), so the ranks
        # of a DDP step get batches of similar length and none waits long for the others at the all-reduce
        per_step = self.num_replicas * self.accumulation
        steps = [batches[i : i + per_step] for i in range(0, len(batches), per_step)]
        whole = len(batches) // per_step  # a last, partial step stays last: it would shift every rank after it
        permutation = torch.randperm(whole, generator=generator).tolist() + list(range(whole, len(steps)))
        return [batch for i in permutation for batch in steps[i]]

    def _pack(self, order: torch.Tensor) -> list[list[int]]:
        """Cut length-sorted indices into batches."""
        if self.max_tokens is None:
            batches = [b.tolist() for b in order.split(self.batch_size)]
            return [b for b in batches if len(b) == self.batch_size] if self.drop_last else batches
        batches, batch, longest = [], [], 0
        for index, length in zip(order.tolist(), self.lengths[order].tolist(), strict=True):
            longest_if_added = max(longest, length)
            if batch and (len(batch) == self.batch_size or (len(batch) + 1) * longest_if_added > self.max_tokens):
                batches.append(batch)
                batch, longest_if_added = [], length
            batch.append(index)
            longest = longest_if_added
        if batch:
            batches.append(batch)
        return batches

    def _shard(self, batches: list[list[int]]) -> list[list[int]]:
        """This rank's batches: for training the same number on every rank, for evaluation each example once."""
        replicas = self.num_replicas
        if replicas == 1:
            return batches
        if not self.shuffle:
            return self._at_least(batches, replicas)[self.rank :: replicas]
        if self.drop_last:
            batches = batches[: len(batches) // replicas * replicas]
        else:
            total = math.ceil(len(batches) / replicas) * replicas
            batches = batches + [batches[i % len(batches)] for i in range(total - len(batches))]
        return batches[self.rank :: replicas]

    @staticmethod
    def _at_least(batches: list[list[int]], count: int) -> list[list[int]]:
        """``batches`` with the largest halved until there are ``count``; with too few examples, some repeated."""
        batches = [b for b in batches if b]  # an empty split packs as one empty batch
        while 0 < len(batches) < count and max(len(b) for b in batches) > 1:
            i = max(range(len(batches)), key=lambda j: len(batches[j]))
            half = (len(batches[i]) + 1) // 2
            batches[i : i + 1] = [batches[i][:half], batches[i][half:]]
        if 0 < len(batches) < count:
            warnings.warn(f"an evaluation split of {len(batches)} examples on {count} processes: "
                          f"{count - len(batches)} of them are scored twice", stacklevel=2)
            batches += [batches[i % len(batches)] for i in range(count - len(batches))]
        return batches
