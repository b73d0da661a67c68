"""The fixed-size crops of the detection and segmentation references (``scale_jitter``,
``shorter_side_crop``): the sizes they draw are torchvision's, and torchvision's own
kernels on the drawn numbers (resize, pad at the bottom and right, crop) give the torch
backend's images, boxes and masks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from helpers.shapes import shapes
from torchvision import tv_tensors

from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.geometry_torch import apply_row
from dali_pipes.augment.ops.fixed_size import FixedSizeCrop, ScaleJitter, ShorterSideCrop
from dali_pipes.augment.pipeline import Draw, Pipeline
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.selfcheck.bounds import EXACT, figures

FILL = (123, 117, 104)


def test_scale_jitter_fits_the_image_into_its_size_times_the_drawn_factor() -> None:
    op = ScaleJitter(size=[200, 300], scale_range=[0.5, 2.0])
    sizes = np.array([[100, 100], [400, 100], [50, 600]])
    for u, factor in ((0.0, 0.5), (1.0, 2.0), (0.5, 1.25)):
        got = op.resized_to(sizes, np.full(3, u))
        fit = np.minimum(200 / sizes[:, 0], 300 / sizes[:, 1]) * factor
        assert np.array_equal(got, np.floor(sizes * fit[:, None]).astype(np.int64))


def test_shorter_side_crop_resizes_the_shorter_side_as_torchvisions_resize_does() -> None:
    op = ShorterSideCrop(size=64, min_size=100, max_size=200)
    sizes = np.array([[120, 333], [500, 77], [90, 90]])
    for u in (0.0, 0.37, 0.999):
        side = 100 + int(u * 100)
        got = op.resized_to(sizes, np.full(3, u))
        for (h, w), (nh, nw) in zip(sizes, got, strict=True):
            image = torch.zeros((1, int(h), int(w)), dtype=torch.uint8)
            assert F.resize(image, [side]).shape[-2:] == (nh, nw)


def reference(x: Any, g: Geometry, j: int, fill: Any) -> Any:
    """torchvision's kernels on sample ``j``'s drawn numbers: resize, pad at the bottom and
    right where smaller than the crop, crop."""
    (nh, nw), (top, left), (oh, ow) = g.resize[j], g.crop[j], g.out
    pad = [0, 0, max(ow - int(nw), 0), max(oh - int(nh), 0)]  # left, top, right, bottom
    resized = F.resize(x, [int(nh), int(nw)], antialias=True)
    return F.crop(F.pad(resized, pad, fill=fill), int(top), int(left), oh, ow)


@pytest.mark.parametrize(
    "op",
    [
        ScaleJitter(size=96, scale_range=[0.2, 2.0], fill=list(FILL)),
        ShorterSideCrop(size=96, min_size=40, max_size=200, fill=list(FILL)),
    ],
    ids=["scale_jitter", "shorter_side_crop"],
)
def test_torchvisions_kernels_on_the_drawn_numbers_give_our_sample(op: FixedSizeCrop) -> None:
    rng = np.random.default_rng(3)
    sizes = rng.integers(60, 240, size=(20, 2))
    objects = [shapes(rng, int(h), int(w), 3) for h, w in sizes]
    boxes = Boxes.of_samples([(b, np.arange(1, len(b) + 1)) for _, b in objects])
    pipeline = Pipeline(op)
    g = op.plan(sizes, rng.random((len(sizes), op.draws())), 0)
    draw = Draw(g, ())
    kept, keep = pipeline.targets.boxes(draw, boxes)
    ours, theirs, padded = [], [], 0
    for j, (masks, xyxy) in enumerate(objects):
        h, w = (int(v) for v in sizes[j])
        image = torch.from_numpy(rng.integers(0, 256, (3, h, w), dtype=np.uint8))
        padded += bool((g.resize[j] < np.asarray(g.out)).any())

        want_image = reference(tv_tensors.Image(image), g, j, list(FILL))
        box_input = tv_tensors.BoundingBoxes(
            torch.from_numpy(xyxy), format="XYXY", canvas_size=(h, w)
        )
        want_boxes = F.clamp_bounding_boxes(reference(box_input, g, j, None))
        want_masks = reference(tv_tensors.Mask(torch.from_numpy(masks)), g, j, 0)
        got_boxes, _ = kept.of(j)
        sane = (want_boxes[:, 2] - want_boxes[:, 0] >= 1) & (
            want_boxes[:, 3] - want_boxes[:, 1] >= 1
        )
        assert np.allclose(want_boxes[sane].numpy(), got_boxes, atol=1e-3), f"sample {j}"
        got_masks = pipeline.targets.mask_torch(
            torch.from_numpy(masks[keep[boxes.sample == j]]), draw, j
        )
        assert torch.equal(want_masks.as_subclass(torch.Tensor)[sane], got_masks), f"sample {j}"
        ours.append(apply_row(image, g, j).float())
        theirs.append(want_image.as_subclass(torch.Tensor).float())
    # DALI's edge filter on the resize's outer lines is the only difference (geometry_torch)
    assert figures(torch.stack(ours), torch.stack(theirs)).mean <= EXACT.mean
    assert padded >= 3  # images smaller than the crop were padded


def test_scale_jitters_corner_is_one_draw_for_both_offsets_as_fixed_size_crops() -> None:
    op = ScaleJitter(size=[100, 200], scale_range=[2.0, 2.0])  # resized larger: room on both
    sizes = np.array([[100, 100]])
    g = op.plan(sizes, np.array([[0.0, 0.5, 0.9]]), 0)
    room = g.resize[0] - np.array([100, 200])  # 200x200 resized: 100 down, none across
    assert list(g.crop[0]) == [int(room[0] * 0.5), int(room[1] * 0.5)]


def test_views_of_a_crop_padded_past_its_resized_image_are_refused_in_one_line() -> None:
    from dali_pipes.augment.spec import AugmentSpec, SplitAugment
    from dali_pipes.errors import ConfigError

    crop = {"op": "scale_jitter", "size": 64, "scale_range": [0.1, 0.5]}
    with pytest.raises(ConfigError, match=r"views: the scale_jitter crop pads past its resized"):
        AugmentSpec(train=SplitAugment(crop=crop, views={"a": {}, "b": {}})).views(True)
