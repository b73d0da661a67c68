"""The torch realisation equals torchvision inside and DALI's clamped filter at the edges."""

from __future__ import annotations

import torch
import torchvision.transforms.v2.functional as F

from dali_pipes.augment import Context
from dali_pipes.augment.geometry_torch import apply_geometry
from dali_pipes.augment.ops.flip import HorizontalFlip


def test_interior_is_torchvisions_resized_crop_and_edges_are_close() -> None:
    g = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (3, 300, 400), dtype=torch.uint8, generator=g)
    ours = apply_geometry(image, (30, 20, 250, 200), (64, 64), (0, 0), (64, 64))
    ref = F.resized_crop(image, 20, 30, 200, 250, [64, 64], antialias=True)
    assert torch.equal(ours[:, 1:-1, 1:-1], ref[:, 1:-1, 1:-1])
    assert (ours.int() - ref.int()).abs().max() < 64  # edges: clamped vs renormalised taps


def test_flat_image_stays_flat_and_flip_mirrors() -> None:
    image = torch.full((3, 50, 70), 123, dtype=torch.uint8)
    out = apply_geometry(image, (0, 0, 70, 50), (40, 56), (4, 8), (32, 32))
    assert out.shape == (3, 32, 32) and bool((out == 123).all())
    ramp = torch.arange(70, dtype=torch.uint8).repeat(3, 50, 1)
    a = apply_geometry(ramp, (0, 0, 70, 50), (50, 70), (0, 0), (50, 70))
    b = HorizontalFlip().torch(a, {"flip": 1}, Context(size=(50, 70)))
    assert torch.equal(a.flip(-1), b)


def test_extreme_aspect_ratio_is_resampled_without_a_huge_intermediate() -> None:
    """A 2 x 40000 image resized to shorter side 256 would be 256 x 5 120 000 pixels; only
    the 224 x 224 centre is computed, and it matches the ordinary path's values."""
    ramp = torch.arange(40000, dtype=torch.float32).div(40000 / 255).to(torch.uint8)
    image = ramp.repeat(3, 2, 1)
    out = apply_geometry(image, (0, 0, 40000, 2), (256, 5_120_000), (16, 2_559_888), (224, 224))
    assert out.shape == (3, 224, 224)
    centre = int(ramp[20000])
    assert abs(int(out[0, 100, 112]) - centre) <= 1
    small = torch.randint(
        0, 256, (3, 40, 60), dtype=torch.uint8, generator=torch.Generator().manual_seed(1)
    )
    fast = apply_geometry(small, (0, 0, 60, 40), (36, 54), (2, 11), (32, 32))
    from dali_pipes.augment.geometry_torch import _resample_direct

    direct = _resample_direct(small, (36, 54), (2, 11), (32, 32))
    assert (fast.int() - direct.int()).abs().max() <= 1
