"""Boxes move with their image: the NumPy geometry every backend is fed gives torchvision
v2's own box kernels' result for the same window, resize, crop and flip, and clipping and
dropping degenerate boxes is its ClampBoundingBoxes then SanitizeBoundingBoxes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional as F
from torchvision import tv_tensors

from dali_pipes.augment.geometry import (
    ATTEMPTS,
    Geometry,
    plan_random_resized_crop,
    plan_resize_center_crop,
)
from dali_pipes.augment.targets.boxes import Boxes, flipped, sanitized, through_geometry


def random_boxes(rng: np.random.Generator, sizes: np.ndarray, most: int = 6) -> Boxes:
    per_sample = []
    for h, w in sizes:
        k = int(rng.integers(0, most + 1))
        x = np.sort(rng.uniform(0, w, size=(k, 2)), axis=1)
        y = np.sort(rng.uniform(0, h, size=(k, 2)), axis=1)
        xyxy = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1)
        per_sample.append((xyxy, rng.integers(1, 91, size=k)))
    return Boxes.of_samples(per_sample)


def geometries(rng: np.random.Generator, sizes: np.ndarray) -> list[Geometry]:
    u = rng.random((len(sizes), 4 * ATTEMPTS))
    return [
        plan_random_resized_crop(sizes, u, 224, (0.08, 1.0), (3 / 4, 4 / 3)),
        plan_random_resized_crop(sizes, u, 96, (0.5, 1.0), (1.0, 1.0)),
        plan_resize_center_crop(sizes, 256, 224),
    ]


def torchvision_boxes(
    xyxy: np.ndarray, size: tuple[int, int], geometry: Geometry, j: int, flip: bool
) -> torch.Tensor:
    """The boxes through torchvision v2's kernels: crop the window, resize it, crop the
    output, flip, then clamp and sanitize."""
    (x, y, w, h), (nh, nw), (top, left) = geometry.row(j)
    boxes = tv_tensors.BoundingBoxes(torch.from_numpy(xyxy), format="XYXY", canvas_size=size)
    boxes = F.crop(boxes, y, x, h, w)
    boxes = F.resize(boxes, [nh, nw])
    boxes = F.crop(boxes, top, left, *geometry.out)
    if flip:
        boxes = F.horizontal_flip(boxes)
    boxes = F.clamp_bounding_boxes(boxes)
    sane = T.SanitizeBoundingBoxes(min_size=1.0, labels_getter=None)
    return sane(boxes).as_subclass(torch.Tensor)


@pytest.mark.parametrize("seed", range(4))
def test_boxes_through_the_drawn_geometry_equal_torchvisions_kernels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(40, 900, size=(16, 2))
    boxes = random_boxes(rng, sizes)
    flags = rng.integers(0, 2, size=len(sizes))
    for geometry in geometries(rng, sizes):
        moved = flipped(through_geometry(boxes, geometry), flags, geometry.out, horizontal=True)
        kept, keep = sanitized(moved, geometry.out)
        assert keep.shape == (len(boxes.xyxy),)
        for j, (h, w) in enumerate(sizes):
            got, labels = kept.of(j)
            want = torchvision_boxes(boxes.of(j)[0], (int(h), int(w)), geometry, j, bool(flags[j]))
            assert got.shape == tuple(want.shape), f"sample {j}: kept {len(got)}, want {len(want)}"
            np.testing.assert_allclose(got, want.numpy(), atol=1e-3)
            assert (labels == boxes.of(j)[1][keep[boxes.sample == j]]).all()


def test_a_vertical_flip_mirrors_top_and_bottom_as_torchvision_does() -> None:
    xyxy = np.array([[10, 20, 30, 60], [0, 0, 5, 5]], np.float32)
    boxes = Boxes.of_samples([(xyxy, np.array([1, 2]))])
    got = flipped(boxes, np.array([1]), (100, 50), horizontal=False).xyxy
    want = F.vertical_flip(
        tv_tensors.BoundingBoxes(torch.from_numpy(xyxy), format="XYXY", canvas_size=(100, 50))
    )
    np.testing.assert_allclose(got, want.numpy())


def test_a_sample_without_boxes_keeps_its_place_with_empty_targets() -> None:
    boxes = Boxes.of_samples(
        [
            (np.array([[1, 1, 9, 9]]), np.array([3])),
            (np.zeros((0, 4)), np.zeros(0)),
            (np.array([[2, 2, 4, 4], [0, 0, 8, 8]]), np.array([5, 6])),
        ]
    )
    assert boxes.count == 3 and boxes.sample.tolist() == [0, 2, 2]
    empty, labels = boxes.of(1)
    assert empty.shape == (0, 4) and empty.dtype == np.float32 and labels.dtype == np.int64
    assert boxes.of(2)[1].tolist() == [5, 6]


def test_boxes_outside_the_crop_or_thinner_than_the_minimum_are_dropped_with_their_labels() -> None:
    xyxy = np.array(
        [[-20, -20, -5, -5], [5, 5, 50, 50], [10, 10, 10.5, 40], [90, 90, 130, 130]], np.float32
    )
    boxes = Boxes.of_samples([(xyxy, np.array([1, 2, 3, 4]))])
    kept, keep = sanitized(boxes, (100, 100), min_size=1.0)
    assert keep.tolist() == [False, True, False, True]
    assert kept.labels.tolist() == [2, 4]
    np.testing.assert_allclose(kept.xyxy, [[5, 5, 50, 50], [90, 90, 100, 100]])
    assert sanitized(boxes, (100, 100), min_size=20.0)[1].tolist() == [False, True, False, False]


def test_boxes_and_labels_of_unequal_length_are_refused_naming_the_sample() -> None:
    with pytest.raises(ValueError, match="sample 1: 2 boxes but 1 labels"):
        Boxes.of_samples([(np.zeros((0, 4)), np.zeros(0)), (np.zeros((2, 4)), np.zeros(1))])
