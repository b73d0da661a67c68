"""The parity figures gathered pair by pair are the figures of the pairs joined."""

from __future__ import annotations

import pytest
import torch

from dali_pipes.selfcheck.bounds import Difference, figures


def test_figures_gathered_image_by_image_equal_those_of_the_joined_epoch() -> None:
    gen = torch.Generator().manual_seed(0)
    shapes = [(3, 5, 7), (3, 11, 4), (1, 2, 9)]  # images of their own sizes
    a = [torch.randint(0, 256, s, generator=gen).float() for s in shapes]
    b = [x + torch.randint(-20, 21, x.shape, generator=gen) for x in a]
    gathered = Difference()
    for x, y in zip(a, b, strict=True):
        gathered.add(x, y)
    joined = figures(torch.cat([x.flatten() for x in a]), torch.cat([y.flatten() for y in b]))
    assert gathered.values == sum(x.numel() for x in a)
    assert gathered.figures().mean == pytest.approx(joined.mean, rel=1e-6)
    assert gathered.figures().max == joined.max
    assert gathered.figures().over16 == pytest.approx(joined.over16, rel=1e-6)
    assert joined.over16 > 0 and joined.max > 16  # the share and the max are exercised


def test_figures_of_nothing_compared_are_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        Difference().figures()
