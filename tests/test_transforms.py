"""The torch realisation equals torchvision inside and DALI's clamped filter at the edges."""

from __future__ import annotations

import torch
import torchvision.transforms.v2.functional as F

from dali_pipes.transforms import apply_geometry


def test_interior_is_torchvisions_resized_crop_and_edges_are_close() -> None:
    g = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (3, 300, 400), dtype=torch.uint8, generator=g)
    ours = apply_geometry(image, (30, 20, 250, 200), (64, 64), (0, 0), (64, 64), flip=False)
    ref = F.resized_crop(image, 20, 30, 200, 250, [64, 64], antialias=True)
    assert torch.equal(ours[:, 1:-1, 1:-1], ref[:, 1:-1, 1:-1])
    assert (ours.int() - ref.int()).abs().max() < 64  # edges: clamped vs renormalised taps


def test_flat_image_stays_flat_and_flip_mirrors() -> None:
    image = torch.full((3, 50, 70), 123, dtype=torch.uint8)
    out = apply_geometry(image, (0, 0, 70, 50), (40, 56), (4, 8), (32, 32), flip=False)
    assert out.shape == (3, 32, 32) and bool((out == 123).all())
    ramp = torch.arange(70, dtype=torch.uint8).repeat(3, 50, 1)
    a = apply_geometry(ramp, (0, 0, 70, 50), (50, 70), (0, 0), (50, 70), flip=False)
    b = apply_geometry(ramp, (0, 0, 70, 50), (50, 70), (0, 0), (50, 70), flip=True)
    assert torch.equal(a.flip(-1), b)
