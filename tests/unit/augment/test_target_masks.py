"""Masks move with their image: the torch realisation of a geometry row is torchvision
v2's own Mask kernels, a window past the image's edge pads with the fill (the ignore index
for a semantic mask), and on drawn shapes every kept box still encloses its object, whose
mask covers it, after each geometry and flip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from helpers.shapes import iou, shapes, tight_box
from torchvision import tv_tensors

from dali_pipes.augment.geometry import (
    ATTEMPTS,
    Geometry,
    plan_random_resized_crop,
    plan_resize_center_crop,
)
from dali_pipes.augment.geometry_torch import apply_row
from dali_pipes.augment.targets.boxes import Boxes, flipped, sanitized, through_geometry
from dali_pipes.augment.targets.masks_torch import IGNORE_INDEX, mask_flip, mask_row


def plans(rng: np.random.Generator, sizes: np.ndarray) -> list[Geometry]:
    u = rng.random((len(sizes), 4 * ATTEMPTS))
    return [
        plan_random_resized_crop(sizes, u, 160, (0.25, 1.0), (3 / 4, 4 / 3)),
        plan_resize_center_crop(sizes, 180, 160),
    ]


def test_a_mask_through_a_geometry_row_is_torchvisions_nearest_resized_crop() -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(60, 400, size=(8, 2))
    for geometry in plans(rng, sizes):
        for j, (h, w) in enumerate(sizes):
            mask = torch.from_numpy(rng.integers(0, 21, size=(1, h, w), dtype=np.uint8))
            (x, y, ww, wh), (nh, nw), (top, left) = geometry.row(j)
            want = F.crop(
                F.resize(F.crop(tv_tensors.Mask(mask), y, x, wh, ww), [nh, nw]),
                top,
                left,
                *geometry.out,
            )
            assert torch.equal(mask_row(mask, geometry, j), want.as_subclass(torch.Tensor))


def test_a_window_past_the_image_pads_a_semantic_mask_with_the_ignore_index() -> None:
    mask = torch.full((1, 10, 10), 7, dtype=torch.uint8)
    geometry = Geometry(
        window=np.array([[-4, -2, 16, 12]]),
        resize=np.array([[12, 16]]),
        crop=np.zeros((1, 2), np.int64),
        out=(12, 16),
        fill=(0, 0, 0),
    )
    out = mask_row(mask, geometry, 0, fill=IGNORE_INDEX)
    assert out.shape == (1, 12, 16)
    assert (out[0, 2:12, 4:14] == 7).all()
    assert (out[0, :2] == IGNORE_INDEX).all() and (out[0, :, :4] == IGNORE_INDEX).all()
    assert (out[0, :, 14:] == IGNORE_INDEX).all()


def test_an_image_with_no_objects_has_an_empty_mask_of_the_output_size() -> None:
    geometry = plan_resize_center_crop(np.array([[50, 80]]), 64, 48)
    out = mask_row(torch.zeros((0, 50, 80), dtype=torch.uint8), geometry, 0)
    assert out.shape == (0, 48, 48)


@pytest.mark.parametrize("seed", range(3))
def test_every_kept_box_encloses_its_drawn_object_and_its_mask_covers_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(120, 360, size=(6, 2))
    drawn = [shapes(rng, int(h), int(w), 4) for h, w in sizes]
    boxes = Boxes.of_samples([(b, np.arange(1, len(b) + 1)) for _, b in drawn])
    flags = rng.integers(0, 2, size=len(sizes))
    checked = 0
    for geometry in plans(rng, sizes):
        moved = flipped(through_geometry(boxes, geometry), flags, geometry.out, horizontal=True)
        kept, keep = sanitized(moved, geometry.out)
        for j, (masks, _) in enumerate(drawn):
            flip = bool(flags[j])
            out = mask_flip(mask_row(torch.from_numpy(masks), geometry, j), flip)
            # Each object painted white on black goes through the image's own resampling:
            # its pixels (the fully white ones) must lie in its box and in its mask.
            painted = torch.from_numpy(np.repeat(masks[:, None] * 255, 3, 1))
            pixels = [mask_flip(apply_row(p, geometry, j), flip)[0] for p in painted]
            xyxy, labels = kept.of(j)
            for box, label in zip(xyxy, labels, strict=True):
                instance = out[label - 1]
                tight = tight_box(instance)
                assert tight is not None, f"sample {j}: box {box} kept with no mask pixel"
                if min(box[2] - box[0], box[3] - box[1]) >= 8:
                    # A rectangle cut by the crop still fills its clipped box; an ellipse
                    # cut by it does not (torchvision's boxes are the same): those whole.
                    oh, ow = geometry.out
                    whole = box[0] > 0 and box[1] > 0 and box[2] < ow and box[3] < oh
                    if (label - 1) % 2 == 0 or whole:
                        assert iou(box, tight) >= 0.9, f"sample {j}: box {box} vs mask {tight}"
                    core = (pixels[label - 1] >= 250).numpy()
                    ys, xs = np.nonzero(core)
                    assert (xs >= box[0] - 1).all() and (xs < box[2] + 1).all()
                    assert (ys >= box[1] - 1).all() and (ys < box[3] + 1).all()
                    covered = instance.numpy()[core.astype(bool)].mean() if core.any() else 1
                    assert covered >= 0.99, f"sample {j}: mask covers {covered:.3f} of object"
                    checked += 1
            dropped = np.flatnonzero(~keep[boxes.sample == j])
            for i in dropped:
                assert out[i].sum() <= 2 * max(geometry.out), f"sample {j}: object {i} dropped"
    assert checked >= 20
