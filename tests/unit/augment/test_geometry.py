"""Shared geometry reproduces torchvision's Resize/CenterCrop/RandomResizedCrop rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torchvision.transforms import RandomResizedCrop

from dali_pipes.augment.geometry import random_resized_crop, resize_shorter
from dali_pipes.augment.keyed import uniforms
from dali_pipes.augment.ops.crop import ResizeCenterCrop

sizes_strategy = st.tuples(st.integers(1, 3000), st.integers(1, 3000))


@settings(max_examples=200, deadline=None)
@given(sizes_strategy, st.integers(1, 512))
def test_resize_shorter_matches_torchvision_output_size(hw: tuple[int, int], size: int) -> None:
    image = torch.empty(0, *hw)  # no channels: torchvision computes the size, moves nothing
    expected = F.resize(image, [size], antialias=False).shape[-2:]
    assert tuple(resize_shorter(np.array([hw]), size)[0]) == tuple(expected)


@pytest.mark.parametrize("hw", [(480, 640), (640, 480), (257, 256), (1000, 300), (256, 256)])
def test_centre_crop_offsets_match_torchvision(hw: tuple[int, int]) -> None:
    g = ResizeCenterCrop(size=224, resize=256).plan(np.array([hw]), np.zeros((1, 0)), 0)
    nh, nw = (int(v) for v in g.resize[0])
    ramp = torch.arange(nh * nw, dtype=torch.float64).view(1, nh, nw)
    top, left = (int(v) for v in g.crop[0])
    assert torch.equal(F.center_crop(ramp, [224, 224]), ramp[:, top : top + 224, left : left + 224])


@settings(max_examples=200, deadline=None)
@given(sizes_strategy, st.integers(0, 2**31 - 1))
def test_random_resized_crop_windows_lie_inside_and_respect_scale_and_ratio(
    hw: tuple[int, int], seed: int
) -> None:
    scale, ratio = (0.08, 1.0), (3 / 4, 4 / 3)
    u = uniforms(seed, 0, np.arange(1), 40).reshape(1, 10, 4)
    x, y, w, h = (int(v) for v in random_resized_crop(np.array([hw]), u, scale, ratio)[0])
    H, W = hw
    assert 0 <= x and 0 <= y and 1 <= w and 1 <= h and x + w <= W and y + h <= H
    # Either a sampled crop (area and ratio within bounds, up to rounding) or the fallback.
    area = w * h / (H * W)
    sampled = scale[0] * 0.5 <= area <= scale[1] and ratio[0] * 0.5 <= w / h <= ratio[1] * 2
    fallback = (w == W or h == H) and x == (W - w) // 2 and y == (H - h) // 2
    assert sampled or fallback


def test_random_resized_crop_falls_back_to_torchvisions_central_crop_for_extreme_images() -> None:
    # 1 x 1000: no sampled crop can satisfy the ratio, so the fallback decides.
    u = np.full((1, 10, 4), 0.5)
    x, y, w, h = random_resized_crop(np.array([[1, 1000]]), u, (0.08, 1.0), (3 / 4, 4 / 3))[0]
    assert (h, w) == (1, 1) and x == (1000 - 1) // 2 and y == 0


def test_random_resized_crop_statistics_match_torchvision() -> None:
    """Same distribution of crop areas as torchvision's own sampler (not the same draws)."""
    hw = np.array([[375, 500]])
    ours = []
    for i in range(2000):
        u = uniforms(5, 0, np.array([i]), 40).reshape(1, 10, 4)
        _, _, w, h = random_resized_crop(hw, u, (0.08, 1.0), (3 / 4, 4 / 3))[0]
        ours.append(w * h / (375 * 500))
    torch.manual_seed(5)
    theirs = []
    image = torch.empty(1, 375, 500)
    for _ in range(2000):
        _, _, h, w = RandomResizedCrop.get_params(image, [0.08, 1.0], [3 / 4, 4 / 3])
        theirs.append(w * h / (375 * 500))
    assert abs(np.mean(ours) - np.mean(theirs)) < 0.03
    assert abs(np.median(ours) - np.median(theirs)) < 0.04


def test_draws_depend_only_on_seed_epoch_and_sample() -> None:
    a = uniforms(1, 2, np.array([5, 9, 3]), 8)
    b = uniforms(1, 2, np.array([3]), 8)
    assert np.array_equal(a[2], b[0])
    assert not np.array_equal(uniforms(1, 3, np.array([3]), 8), b)
    assert not np.array_equal(uniforms(2, 2, np.array([3]), 8), b)
    big = uniforms(0, 0, np.arange(10000), 4)
    assert 0 <= big.min() and big.max() < 1 and abs(big.mean() - 0.5) < 0.01


def test_an_offset_skips_the_counters_an_earlier_op_owns() -> None:
    whole = uniforms(4, 1, np.array([7, 8]), 10)
    assert np.array_equal(uniforms(4, 1, np.array([7, 8]), 3, offset=7), whole[:, 7:])
