"""Repeated augmentation: timm's ``RepeatAugSampler`` rank for rank, each copy of a sample
on another rank and with a repeat number of its own."""

from __future__ import annotations

import pytest
from timm.data.distributed_sampler import RepeatAugSampler

from dali_pipes.data.repeated import RepeatedSampler
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.errors import ConfigError


def sampler(
    n: int, count: int, rank: int = 0, world_size: int = 1, seed: int = 0
) -> RepeatedSampler:
    spec = SamplingSpec(seed=seed, rank=rank, world_size=world_size)
    return RepeatedSampler(n, spec, count)


@pytest.mark.parametrize(("n", "world_size", "count"), [(24, 1, 3), (24, 2, 3), (30, 3, 2)])
def test_each_rank_reads_what_timms_repeat_aug_sampler_gives_it(
    n: int, world_size: int, count: int
) -> None:
    for rank in range(world_size):
        theirs = RepeatAugSampler(
            list(range(n)), world_size, rank, num_repeats=count, selected_round=0
        )
        for epoch in (0, 5):
            theirs.set_epoch(epoch)
            assert sampler(n, count, rank, world_size).indices(epoch).tolist() == list(theirs)


def test_an_epoch_keeps_the_datasets_size_and_sends_a_samples_copies_to_other_ranks() -> None:
    n, world, count = 30, 3, 3
    shares = [sampler(n, count, r, world, seed=4) for r in range(world)]
    assert {s.num_samples for s in shares} == {n // world}
    where: dict[int, list[int]] = {}
    for rank, s in enumerate(shares):
        for i in s.indices(2).tolist():
            where.setdefault(i, []).append(rank)
    assert sum(len(r) for r in where.values()) == n
    assert all(len(set(ranks)) == len(ranks) for ranks in where.values())


def test_each_copy_has_its_own_repeat_number_and_a_resumed_epoch_keeps_them() -> None:
    whole = sampler(20, 3, seed=1)
    pairs = list(zip(whole.indices(1).tolist(), whole.repeats(1).tolist(), strict=True))
    assert len(pairs) == len(set(pairs)) == 20 and {k for _, k in pairs} == {0, 1, 2}
    assert whole.repeats(1, start=8).tolist() == [k for _, k in pairs[8:]]
    assert whole.indices(1, start=8).tolist() == [i for i, _ in pairs[8:]]


def test_a_count_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"sampling\.repeats=0"):
        sampler(10, 0)
