"""Weighted and class-balanced sampling: torch's own draws, dealt out like DistributedSampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import WeightedRandomSampler

from dali_pipes.data.specs import SamplingSpec
from dali_pipes.data.weighted import WeightedSampler, class_balanced
from dali_pipes.errors import ConfigError

WEIGHTS = np.array([5.0, 1.0, 0.0, 2.0, 0.5, 8.0, 1.0, 3.0, 0.25, 4.0, 1.0, 2.0])


def sampler(
    weights: np.ndarray = WEIGHTS,
    draws: int = 30,
    replacement: bool = True,
    rank: int = 0,
    world_size: int = 1,
    drop_last: bool = False,
    seed: int = 7,
) -> WeightedSampler:
    spec = SamplingSpec(seed=seed, rank=rank, world_size=world_size, drop_last=drop_last)
    return WeightedSampler(len(weights), spec, weights, draws, replacement)


@pytest.mark.parametrize("replacement", [True, False])
def test_an_epochs_draws_are_torchs_weighted_random_samplers_with_the_epochs_seed(
    replacement: bool,
) -> None:
    draws = 30 if replacement else 9
    ours = sampler(draws=draws, replacement=replacement)
    for epoch in (0, 3):
        g = torch.Generator()
        g.manual_seed(7 + epoch)
        theirs = WeightedRandomSampler(WEIGHTS.tolist(), draws, replacement, generator=g)
        assert ours.indices(epoch).tolist() == list(theirs)


def test_over_many_epochs_each_sample_is_drawn_as_often_as_its_weight_says() -> None:
    """Counts over 400 epochs of 30 draws against their binomial expectation: every
    sample within 4.5 standard deviations (a weight of 0 never drawn)."""
    ours, epochs = sampler(), 400
    counts = np.bincount(np.concatenate([ours.indices(e) for e in range(epochs)]), minlength=12)
    n, p = 30 * epochs, WEIGHTS / WEIGHTS.sum()
    sd = np.sqrt(n * p * (1 - p))
    assert counts[2] == 0
    assert np.all(np.abs(counts - n * p) <= 4.5 * np.maximum(sd, 1e-9)), (counts, n * p)


@pytest.mark.parametrize("power", [1.0, 0.5, 0.0])
def test_class_balanced_weights_draw_each_class_by_its_count_to_the_power(power: float) -> None:
    labels = np.array([0] * 40 + [1] * 10 + [2] * 2)  # a long tail
    weights = class_balanced(labels, power)
    ours = sampler(weights, draws=52)
    drawn = labels[np.concatenate([ours.indices(e) for e in range(300)])]
    share = np.bincount(drawn, minlength=3) / len(drawn)
    counts = np.bincount(labels).astype(float)
    expected = counts ** (1 - power) / (counts ** (1 - power)).sum()
    assert np.all(np.abs(share - expected) < 0.02), (share, expected)


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_ranks_read_equal_disjoint_shares_of_one_epochs_draws(
    world_size: int, drop_last: bool
) -> None:
    whole = sampler().order(2)
    shares = [
        sampler(rank=r, world_size=world_size, drop_last=drop_last).indices(2)
        for r in range(world_size)
    ]
    assert len({len(s) for s in shares}) == 1
    dealt = np.stack(shares, axis=1).reshape(-1)  # slot k of the padded order, in order
    padded = np.resize(whole, len(dealt)) if len(dealt) > len(whole) else whole[: len(dealt)]
    assert dealt.tolist() == padded.tolist()


def test_an_epoch_resumed_part_way_on_another_world_size_continues_the_same_draws() -> None:
    first = [sampler(rank=r, world_size=2).indices(1)[:5] for r in range(2)]
    consumed = np.stack(first, axis=1).reshape(-1)  # 5 batches of 1 on 2 ranks
    rest = [sampler(rank=r, world_size=3).indices(1, start=10) for r in range(3)]
    resumed = np.stack(rest, axis=1).reshape(-1)
    whole = sampler().order(1)
    assert consumed.tolist() + resumed[:20].tolist() == whole.tolist()


@pytest.mark.parametrize("world_size", [1, 3])
def test_every_draw_of_a_sample_in_an_epoch_has_its_own_repeat_number(world_size: int) -> None:
    seen = []
    for r in range(world_size):
        s = sampler(rank=r, world_size=world_size, drop_last=True)
        seen += list(zip(s.indices(4).tolist(), s.repeats(4).tolist(), strict=True))
    assert len(seen) == len(set(seen))
    assert max(k for _, k in seen) >= 1  # 30 draws of 11 samples repeat some
    one = sampler(draws=9, replacement=False)
    assert one.repeats(4).tolist() == [0] * 9


@pytest.mark.parametrize(
    ("weights", "draws", "replacement", "message"),
    [
        (WEIGHTS[:5], 30, True, r"5 given for 12 samples"),
        (np.zeros(12), 30, True, r"not all 0"),
        (-WEIGHTS, 30, True, r">= 0"),
        (WEIGHTS, 0, True, r"num_samples=0 is invalid"),
        (WEIGHTS, 12, False, r"num_samples=12 without replacement needs as many"),
    ],
)
def test_weights_that_cannot_be_drawn_from_are_one_line(
    weights: np.ndarray, draws: int, replacement: bool, message: str
) -> None:
    spec = SamplingSpec(seed=0)
    with pytest.raises(ConfigError, match=message):
        WeightedSampler(12, spec, weights, draws, replacement)
