"""RankSampler is DistributedSampler, index for index."""

from __future__ import annotations

import pytest
from torch.utils.data import DistributedSampler

from dali_pipes.data.sampling import RankSampler
from dali_pipes.data.specs import SamplingSpec


@pytest.mark.parametrize("n", [1, 5, 17, 64])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_indices_equal_distributed_sampler(
    n: int, world_size: int, drop_last: bool, shuffle: bool
) -> None:
    for rank in range(world_size):
        for epoch in (0, 3):
            ours = RankSampler(
                n,
                SamplingSpec(
                    seed=5, shuffle=shuffle, drop_last=drop_last, rank=rank, world_size=world_size
                ),
            )
            theirs: DistributedSampler[int] = DistributedSampler(
                range(n),  # type: ignore[arg-type]
                num_replicas=world_size,
                rank=rank,
                shuffle=shuffle,
                seed=5,
                drop_last=drop_last,
            )
            theirs.set_epoch(epoch)
            assert ours.indices(epoch).tolist() == list(theirs)
            assert ours.num_samples == len(theirs)


def test_batches_cut_the_shard_and_keep_or_drop_the_tail() -> None:
    keep = RankSampler(10, SamplingSpec(shuffle=False))
    assert [b.tolist() for b in keep.batches(0, 4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    drop = RankSampler(10, SamplingSpec(shuffle=False, drop_last=True))
    assert [b.tolist() for b in drop.batches(0, 4)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert keep.num_batches(4) == 3 and drop.num_batches(4) == 2
