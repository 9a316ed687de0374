"""The bucketing batch sampler: coverage, similar lengths, epochs, ranks, Lightning hooks."""

from __future__ import annotations

import random

import pytest
import torch
from lightning.fabric.utilities.data import _replace_dunder_methods, _set_sampler_epoch
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.data import _update_dataloader
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

from attend.data import BucketBatchSampler

LENGTHS = random.Random(0).choices(range(1, 101), k=1003)


def flat(batches: list[list[int]]) -> list[int]:
    return [i for batch in batches for i in batch]


def spread(batches: list[list[int]]) -> float:
    """Mean (max - min) length within a batch."""
    return sum(max(LENGTHS[i] for i in b) - min(LENGTHS[i] for i in b) for b in batches) / len(batches)


def test_every_index_once_per_epoch_with_similar_lengths() -> None:
    sampler = BucketBatchSampler(LENGTHS, batch_size=16, seed=1, chunk_batches=20)
    batches = list(sampler)
    assert sorted(flat(batches)) == list(range(len(LENGTHS))) and len(batches) == len(sampler)
    assert all(1 <= len(b) <= 16 for b in batches)
    shuffled = list(range(len(LENGTHS)))
    random.Random(2).shuffle(shuffled)
    unbucketed = [shuffled[i : i + 16] for i in range(0, len(shuffled), 16)]
    assert spread(batches) < spread(unbucketed) / 5


def test_set_epoch_reshuffles_reproducibly() -> None:
    sampler = BucketBatchSampler(LENGTHS, batch_size=16, seed=1)
    first = list(sampler)
    assert list(sampler) == first  # same epoch, same order
    sampler.set_epoch(1)
    second = list(sampler)
    assert second != first and sorted(flat(second)) == sorted(flat(first))
    sampler.set_epoch(0)
    assert list(sampler) == first
    assert list(BucketBatchSampler(LENGTHS, batch_size=16, seed=2)) != first


def test_unshuffled_is_sorted_and_complete() -> None:
    batches = list(BucketBatchSampler(LENGTHS, batch_size=10, shuffle=False))
    order = flat(batches)
    assert sorted(order) == list(range(len(LENGTHS)))
    assert [LENGTHS[i] for i in order] == sorted(LENGTHS) and len(batches[-1]) == 3


def test_max_tokens_caps_padded_size() -> None:
    batches = list(BucketBatchSampler(LENGTHS, batch_size=64, max_tokens=400, seed=0))
    assert sorted(flat(batches)) == list(range(len(LENGTHS)))
    assert all(len(b) * max(LENGTHS[i] for i in b) <= 400 for b in batches)
    assert max(len(b) for b in batches) > 10  # short sentences get big batches
    alone = list(BucketBatchSampler([5, 500, 5], batch_size=8, max_tokens=100, shuffle=False))
    assert alone == [[0, 2], [1]]


def test_drop_last_drops_partial_batches() -> None:
    batches = list(BucketBatchSampler(LENGTHS, batch_size=16, drop_last=True, chunk_batches=1000))
    assert all(len(b) == 16 for b in batches) and len(batches) == len(LENGTHS) // 16


def test_two_ranks_get_disjoint_batches_and_equal_counts() -> None:
    for n in (1000, 1003):  # an even and an odd number of batches of 10
        lengths = LENGTHS[:n]
        ranks = [BucketBatchSampler(lengths, 10, seed=4, num_replicas=2, rank=r) for r in (0, 1)]
        batches = [list(r) for r in ranks]
        assert len(batches[0]) == len(batches[1]) == len(ranks[0]) == len(ranks[1])
        assert set(flat(batches[0]) + flat(batches[1])) == set(range(n))  # padding repeats a batch
        if n == 1000:
            assert not set(flat(batches[0])) & set(flat(batches[1]))
    dropped = [list(BucketBatchSampler(LENGTHS, 10, num_replicas=2, rank=r, drop_last=True)) for r in (0, 1)]
    assert len(dropped[0]) == len(dropped[1]) and not set(flat(dropped[0])) & set(flat(dropped[1]))


def test_the_ranks_of_a_training_step_get_batches_of_neighbouring_lengths() -> None:
    """DDP waits for the slowest rank each step: one step's batches come from one stretch of the sorted lengths."""
    lengths = list(range(64))
    random.Random(5).shuffle(lengths)
    ranks = [list(BucketBatchSampler(lengths, 4, seed=6, num_replicas=2, rank=r, chunk_batches=16)) for r in (0, 1)]
    steps = [sorted(lengths[i] for i in first + second) for first, second in zip(*ranks, strict=True)]
    assert all(step == list(range(step[0], step[0] + 8)) and step[0] % 8 == 0 for step in steps)
    assert [step[0] for step in steps] != sorted(step[0] for step in steps)  # the steps are still shuffled
    # a partial last step (5 batches on 2 ranks) stays at the end, where padding completes it
    odd = [list(BucketBatchSampler(list(range(20)), 4, seed=6, num_replicas=2, rank=r)) for r in (0, 1)]
    assert len(odd[0]) == len(odd[1]) == 3 and odd[0][-1] == [16, 17, 18, 19]
    # one process accumulating two batches a step takes the ranks' batches in the same order, two at a time
    accumulating = list(BucketBatchSampler(lengths, 4, seed=6, chunk_batches=16, accumulation=2))
    assert accumulating == [batch for step in zip(*ranks, strict=True) for batch in step]


def test_lightning_injected_sampler_and_set_epoch() -> None:
    dataset = list(range(len(LENGTHS)))
    with _replace_dunder_methods(DataLoader, "dataset"), _replace_dunder_methods(BatchSampler):
        loader = DataLoader(dataset, batch_sampler=BucketBatchSampler(LENGTHS, 8, seed=3), collate_fn=list)
    single = list(loader.batch_sampler)
    shards = []
    for rank in (0, 1):
        injected = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=True)
        updated = _update_dataloader(loader, injected, mode=RunningStage.TRAINING)
        assert isinstance(updated.batch_sampler, BucketBatchSampler) and updated.batch_sampler.rank == rank
        shards.append(list(updated.batch_sampler))
        _set_sampler_epoch(updated, 5)  # what Lightning's fit loop does each epoch
        assert updated.batch_sampler.epoch == 5
    assert sorted(shards[0] + shards[1]) == sorted(single)
    _set_sampler_epoch(loader, 2)
    assert loader.batch_sampler.epoch == 2 and list(loader.batch_sampler) != single
    assert torch.equal(torch.tensor(sorted(flat(list(loader)))), torch.arange(len(LENGTHS)))


def eval_shards(lengths: list[int], batch_size: int, world: int, **kwargs) -> list[list[list[int]]]:
    """Each rank's evaluation batches (no shuffle) out of ``world``."""
    return [
        list(BucketBatchSampler(lengths, batch_size, shuffle=False, num_replicas=world, rank=r, **kwargs))
        for r in range(world)
    ]


def test_evaluation_shards_score_every_example_once() -> None:
    """No padding for val/test: every index on exactly one rank, whatever the world size and batch count."""
    for world in (1, 2, 3, 4):
        for n, batch_size in ((1003, 10), (1000, 10), (21, 8), (19, 8), (25, 10), (4, 10), (7, 3)):
            shards = eval_shards(LENGTHS[:n], batch_size, world)
            everything = [i for shard in shards for i in flat(shard)]
            assert sorted(everything) == list(range(n)), (world, n, batch_size)  # once each, none repeated
            counts = [len(shard) for shard in shards]
            assert min(counts) >= 1 and max(counts) - min(counts) <= 1, (world, n, counts)  # no rank left empty
            assert all(1 <= len(b) <= batch_size for shard in shards for b in shard)
    # 21 examples in batches of 8: 3 batches (8, 8, 5); rank 0 gets two, rank 1 one, and the short batch is scored once
    assert [[len(b) for b in shard] for shard in eval_shards(LENGTHS[:21], 8, 2)] == [[8, 5], [8]]
    # training keeps equal counts (DDP's gradient all-reduce needs them): 3 batches on 2 ranks repeat one
    train = [list(BucketBatchSampler(LENGTHS[:21], 8, num_replicas=2, rank=r)) for r in (0, 1)]
    assert len(train[0]) == len(train[1]) == 2


def test_evaluation_with_more_ranks_than_batches_halves_batches() -> None:
    """3 batches on 4 ranks: the largest is halved so no rank is empty (Lightning skips an empty rank's loop and
    the others would wait for it at the metrics' sync), still each example once; the lengths stay sorted."""
    shards = eval_shards(LENGTHS[:25], 10, 4)  # batches 10, 10, 5 -> 5, 5, 10, 5
    assert [len(shard) for shard in shards] == [1, 1, 1, 1]
    assert sorted(flat([b for shard in shards for b in shard])) == list(range(25))
    order = [i for shard in shards for i in shard[0]]  # rank r has batch r of the (sorted) list
    assert [LENGTHS[i] for i in order] == sorted(LENGTHS[:25])
    many = eval_shards(LENGTHS[:40], 64, 4, max_tokens=10_000)  # one batch -> four of 10
    assert [[len(b) for b in shard] for shard in many] == [[10], [10], [10], [10]]


def test_evaluation_split_smaller_than_the_world_repeats_with_a_warning() -> None:
    """Fewer examples than ranks: a rank must still have a batch, so an example is scored twice, with a warning;
    an empty split leaves every rank empty."""
    with pytest.warns(UserWarning, match="2 examples on 4 processes"):
        shards = eval_shards(LENGTHS[:2], 10, 4)
    assert [len(shard) for shard in shards] == [1, 1, 1, 1] and sorted(set(flat(sum(shards, [])))) == [0, 1]
    assert eval_shards([], 10, 3) == [[], [], []]


def test_lightning_injected_sampler_keeps_evaluation_unpadded() -> None:
    dataset = list(range(21))
    with _replace_dunder_methods(DataLoader, "dataset"), _replace_dunder_methods(BatchSampler):
        loader = DataLoader(dataset, batch_sampler=BucketBatchSampler(LENGTHS[:21], 8, shuffle=False), collate_fn=list)
    shards = []
    for rank in (0, 1):
        injected = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=False)
        shards.append(list(_update_dataloader(loader, injected, mode=RunningStage.VALIDATING).batch_sampler))
    assert [len(s) for s in shards] == [2, 1] and sorted(flat(shards[0] + shards[1])) == dataset
