"""SSD's crop (zoom out, IoU crop, resize) and photometric distortion: the drawn numbers
realised by torchvision v2's own transforms give the torch backend's images, boxes and
masks; every accepted crop keeps a box's centre and meets its minimum IoU; and after the
whole ``ssd``, ``lsj`` and ``detr`` presets every kept box still encloses its drawn object,
which its mask covers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from helpers.shapes import iou, shapes, tight_box
from torchvision import tv_tensors
from torchvision.transforms import v2

from dali_pipes import compose_config
from dali_pipes.augment.base import Context
from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.geometry_torch import apply_row
from dali_pipes.augment.ops.iou_crop import IoUCrop
from dali_pipes.augment.ops.photometric import PhotometricDistort
from dali_pipes.augment.pipeline import Draw, Pipeline
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.config.specs import to_spec
from dali_pipes.selfcheck.bounds import EXACT, figures

FILL = (123, 117, 104)
#: Each preset at about 300 px (DETR's sides and crop branch scaled to these images).
PRESET_SIZE = {
    "detr": [
        "augment.train.crop.min_size=[200,260,300]",
        "augment.train.crop.max_size=500",
        "augment.train.crop.crop_sizes=[150,200]",
        "augment.train.crop.crop_range=[100,200]",
    ]
}


def drawn(seed: int, n: int) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]], Boxes]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(80, 240, size=(n, 2))
    objects = [shapes(rng, int(h), int(w), 4) for h, w in sizes]
    boxes = Boxes.of_samples([(b, np.arange(1, len(b) + 1)) for _, b in objects])
    return sizes, objects, boxes


def torchvision_ssd(
    op: IoUCrop, u: np.ndarray, image: torch.Tensor, masks: np.ndarray, boxes: np.ndarray
) -> dict[str, Any]:
    """torchvision's RandomZoomOut, RandomIoUCrop, Resize and SanitizeBoundingBoxes on one
    sample, their random choices replaced by the ones drawn from ``u``."""
    zoom, crop = op.plans
    h, w = image.shape[-2:]
    left, top, cw, ch = zoom.canvas((h, w), u[:4])
    sample: Any = {
        "image": tv_tensors.Image(image),
        "boxes": tv_tensors.BoundingBoxes(
            torch.from_numpy(boxes), format="XYXY", canvas_size=(h, w)
        ),
        "masks": tv_tensors.Mask(torch.from_numpy(masks)),
    }
    zoomer = v2.RandomZoomOut(op.torchvision().transforms[0].fill, op.zoom_range, p=1.0)
    padding = [left, top, cw - w - left, ch - h - top]
    sample = {k: zoomer.transform(v, {"padding": padding}) for k, v in sample.items()}
    shifted = boxes.astype(np.float64) + np.array([left, top, left, top])
    x, y, nw, nh = (int(v) for v in crop.choose((cw, ch), shifted, u[4:]))
    if (nw, nh) != (cw, ch):
        cx, cy = shifted[:, [0, 2]].mean(1), shifted[:, [1, 3]].mean(1)
        within = torch.from_numpy((x < cx) & (cx < x + nw) & (y < cy) & (cy < y + nh))
        params = {"top": y, "left": x, "height": nh, "width": nw, "is_within_crop_area": within}
        cropper = v2.RandomIoUCrop()
        sample = {k: cropper.transform(v, params) for k, v in sample.items()}
    resize = v2.Resize(list(op.shape_at(0)), antialias=True)
    sample = v2.ClampBoundingBoxes()(resize(sample))
    sample["labels"] = torch.arange(1, len(boxes) + 1)
    return v2.SanitizeBoundingBoxes(min_size=1.0)(sample)


@pytest.mark.parametrize("seed", range(2))
def test_the_drawn_zoom_and_crop_realised_by_torchvisions_transforms_give_our_sample(
    seed: int,
) -> None:
    sizes, objects, boxes = drawn(seed, 24)
    op = IoUCrop(size=96, zoom_p=0.5, fill=list(FILL))
    pipeline = Pipeline(op)
    u = np.random.default_rng(100 + seed).random((len(sizes), op.draws()))
    draw = Draw(op.plan_around(sizes, u, 0, boxes), ())
    kept, keep = pipeline.targets.boxes(draw, boxes)
    rng = np.random.default_rng(seed)
    ours, theirs, zoomed, cropped = [], [], 0, 0
    for j, (masks, xyxy) in enumerate(objects):
        image = torch.from_numpy(rng.integers(0, 256, (3, *sizes[j]), dtype=np.uint8))
        want = torchvision_ssd(op, u[j], image, masks, xyxy)
        got_boxes, got_labels = kept.of(j)
        assert torch.equal(want["labels"], torch.from_numpy(got_labels)), f"sample {j}"
        assert np.allclose(want["boxes"].numpy(), got_boxes, atol=1e-3), f"sample {j}"
        in_sample = keep[boxes.sample == j]
        chosen = torch.from_numpy(masks[in_sample])
        got_masks = pipeline.targets.mask_torch(chosen, draw, j)
        assert torch.equal(want["masks"].as_subclass(torch.Tensor), got_masks), f"sample {j}"
        ours.append(apply_row(image, draw.geometry, j).float())
        theirs.append(want["image"].as_subclass(torch.Tensor).float())
        x, y, w, h = draw.geometry.window[j]
        zoomed += int(x < 0 or y < 0 or x + w > sizes[j][1] or y + h > sizes[j][0])
        cropped += int(len(got_labels) < len(xyxy))
    # DALI's edge filter on the resize's outer lines is the only difference (geometry_torch)
    assert figures(torch.stack(ours), torch.stack(theirs)).mean <= EXACT.mean
    assert zoomed >= 1 and cropped >= 1  # both the zoom and a crop that drops boxes ran


@pytest.mark.parametrize("minimum", [0.0, 0.3, 0.5, 0.7])
def test_every_accepted_crop_keeps_a_box_centre_and_meets_its_minimum_iou(minimum: float) -> None:
    _, crop = IoUCrop(size=64, options=[minimum]).plans
    rng = np.random.default_rng(0)
    cropped = 0
    for _ in range(200):
        w, h = (int(v) for v in rng.integers(40, 400, 2))
        _, boxes = shapes(rng, h, w, int(rng.integers(1, 5)))
        x, y, nw, nh = crop.choose((w, h), boxes.astype(np.float64), rng.random(crop.draws()))
        if (x, y, nw, nh) == (0, 0, w, h):
            continue  # no trial of any round accepted
        cropped += 1
        assert 0.5 <= nw / nh <= 2.0 and int(0.3 * w) <= nw <= w and int(0.3 * h) <= nh <= h
        assert 0 <= x <= w - nw and 0 <= y <= h - nh
        cx, cy = boxes[:, [0, 2]].mean(1), boxes[:, [1, 3]].mean(1)
        inside = (x < cx) & (cx < x + nw) & (y < cy) & (cy < y + nh)
        assert inside.any()
        assert max(iou(b, np.array([x, y, x + nw, y + nh])) for b in boxes[inside]) >= minimum
    assert cropped >= 20, cropped


def test_an_image_without_boxes_or_the_no_crop_option_keeps_the_whole_canvas() -> None:
    rng = np.random.default_rng(1)
    _, crop = IoUCrop(size=64).plans
    _, only_whole = IoUCrop(size=64, options=[1.0]).plans
    boxes = np.array([[10, 10, 50, 40]], np.float64)
    for _ in range(50):
        u = rng.random(crop.draws())
        assert list(crop.choose((120, 90), np.zeros((0, 4)), u)) == [0, 0, 120, 90]
        assert list(only_whole.choose((120, 90), boxes, u)) == [0, 0, 120, 90]


def test_a_box_whose_centre_leaves_the_crop_is_dropped_even_where_it_overlaps() -> None:
    pipeline = Pipeline(IoUCrop(size=50))
    boxes = Boxes.of_samples([(np.array([[0, 0, 60, 60], [70, 70, 100, 100]]), np.array([1, 2]))])
    # the window holds the first box's centre (30, 30), not the second's (85, 85)
    window = Geometry(
        window=np.array([[20, 20, 50, 50]]),
        resize=np.array([[50, 50]]),
        crop=np.zeros((1, 2), np.int64),
        out=(50, 50),
    )
    kept, keep = pipeline.targets.boxes(Draw(window, ()), boxes)
    assert keep.tolist() == [True, False] and kept.labels.tolist() == [1]
    assert np.allclose(kept.xyxy, [[0, 0, 40, 40]])


def test_the_photometric_distortion_is_torchvisions_on_the_drawn_parameters() -> None:
    op = PhotometricDistort()
    rng = np.random.default_rng(2)
    params = op.sample(rng.random((40, op.draws())), Context(size=(32, 48)))
    reference = v2.RandomPhotometricDistort()
    parts = ("brightness", "contrast", "saturation", "hue")
    for j in range(40):
        row = {name: values[j] for name, values in params.items()}
        steps = [int(row[f"at{k}"]) for k in range(4)]
        given: dict[str, Any] = {
            f"{part}_factor": float(row[part]) if i in steps else None
            for i, part in enumerate(parts)
        }
        given["contrast_before"] = steps[1] == 1  # else it comes last, or not at all
        perm = [int(c) for c in row["permutation"]]
        given["channel_permutation"] = None if perm == [0, 1, 2] else torch.tensor(perm)
        image = torch.from_numpy(rng.integers(0, 256, (3, 32, 48), dtype=np.uint8))
        want = reference.transform(tv_tensors.Image(image), given).as_subclass(torch.Tensor)
        assert torch.equal(op.torch(image, row, Context(size=(32, 48))), want), f"sample {j}"


def moved_pixels(pipeline: Pipeline, draw: Draw, j: int, painted: torch.Tensor) -> torch.Tensor:
    """``painted`` through sample ``j``'s geometry and the ops that move pixels."""
    ctx = Context(size=draw.geometry.out)
    image = apply_row(painted, draw.geometry, j)
    for k, op in enumerate(pipeline.ops):
        if not (op.keeps_places or op.pointwise):
            image = op.torch(image, draw.row(k, j), ctx)
    return image


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("preset", ["ssd", "lsj", "detr"])
def test_after_a_detection_preset_every_kept_box_encloses_its_drawn_object(
    preset: str, seed: int
) -> None:
    sized = PRESET_SIZE.get(preset, ["augment.train.crop.size=300"])
    cfg = compose_config([f"augment={preset}", *sized])
    pipeline = to_spec(cfg.augment, AugmentSpec).views(True).pipelines[0]
    sizes, objects, boxes = drawn(10 + seed, 12)
    draw = pipeline.draw(sizes, np.arange(len(sizes)), seed=seed, epoch=0, boxes=boxes)
    kept, keep = pipeline.targets.boxes(draw, boxes)
    checked = 0
    for j, (masks, _) in enumerate(objects):
        out = pipeline.targets.mask_torch(torch.from_numpy(masks[keep[boxes.sample == j]]), draw, j)
        xyxy, labels = kept.of(j)
        for i, (box, label) in enumerate(zip(xyxy, labels, strict=True)):
            tight = tight_box(out[i])
            assert tight is not None, f"sample {j}: box {box} kept with no mask pixel"
            if min(box[2] - box[0], box[3] - box[1]) < 8:
                continue
            oh, ow = draw.geometry.shape(j)
            whole = box[0] > 0 and box[1] > 0 and box[2] < ow and box[3] < oh
            # A cut ellipse does not fill its clipped box; a nearest-resampled mask's edge
            # is up to a pixel off, which costs a box under 20 px more than 0.1 of IoU.
            large = min(box[2] - box[0], box[3] - box[1]) >= 20
            if large and ((label - 1) % 2 == 0 or whole):
                assert iou(box, tight) >= 0.9, f"sample {j}: box {box} vs mask {tight}"
            painted = torch.from_numpy(np.repeat(masks[label - 1][None] * 255, 3, 0))
            core = (moved_pixels(pipeline, draw, j, painted)[0] >= 250).numpy()
            ys, xs = np.nonzero(core)
            assert (xs >= box[0] - 1).all() and (xs < box[2] + 1).all()
            assert (ys >= box[1] - 1).all() and (ys < box[3] + 1).all()
            covered = out[i].numpy()[core].mean() if core.any() else 1
            assert covered >= 0.99, f"sample {j}: mask covers {covered:.3f} of object"
            checked += 1
    assert checked >= 15
