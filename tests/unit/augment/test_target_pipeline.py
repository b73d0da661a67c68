"""A pipeline moves boxes and masks with its images from the same draw: boxes through the
crop and every op equal torchvision v2's kernels on the drawn parameters, colour and blur
ops leave them alone, an op that cannot move them is refused in one line, and DALI's masks
(CPU) equal the torch realisation's pixel for pixel."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional as F
from helpers.shapes import shapes
from torchvision import tv_tensors

from dali_pipes.augment.base import Context
from dali_pipes.augment.pipeline import Draw, Pipeline, parse_pipeline
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.augment.targets.masks_dali import masks_through_geometry
from dali_pipes.errors import ConfigError

RRC = {"op": "random_resized_crop", "size": 96, "scale": [0.2, 1.0]}
OPS: list[Any] = [
    {"op": "hflip", "p": 0.5},
    {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1},
    {"op": "vflip", "p": 0.5},
    {"op": "random_apply", "p": 0.5},  # its default: a colour jitter, then a blur
    {"op": "grayscale", "p": 0.2},
]


def pipeline(crop: Any = RRC, ops: Any = OPS) -> Pipeline:
    return parse_pipeline(crop, ops, "augment.train")


def batch(seed: int, n: int = 12) -> tuple[np.ndarray, Boxes, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(60, 300, size=(n, 2))
    per_sample, masks = [], []
    for h, w in sizes:
        k = int(rng.integers(0, 5))
        x = np.sort(rng.uniform(0, w, size=(k, 2)), axis=1)
        y = np.sort(rng.uniform(0, h, size=(k, 2)), axis=1)
        per_sample.append((np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], 1), np.arange(k) + 1))
        masks.append(rng.integers(0, 3, size=(max(k, 1), h, w), dtype=np.uint8))
    return sizes, Boxes.of_samples(per_sample), masks


def torchvision_boxes(pipe: Pipeline, draw: Draw, boxes: Boxes, j: int, size: Any) -> np.ndarray:
    (x, y, w, h), (nh, nw), (top, left) = draw.geometry.row(j)
    out = tv_tensors.BoundingBoxes(
        torch.from_numpy(boxes.of(j)[0]), format="XYXY", canvas_size=tuple(size)
    )
    out = F.crop(F.resize(F.crop(out, y, x, h, w), [nh, nw]), top, left, *draw.geometry.out)
    for k, op in enumerate(pipe.ops):
        if op.name in ("hflip", "vflip") and draw.row(k, j)["flip"]:
            out = F.horizontal_flip(out) if op.name == "hflip" else F.vertical_flip(out)
    out = F.clamp_bounding_boxes(out)
    return T.SanitizeBoundingBoxes(labels_getter=None)(out).as_subclass(torch.Tensor).numpy()


@pytest.mark.parametrize("seed", range(3))
def test_boxes_through_the_pipeline_equal_torchvisions_kernels_on_the_same_draw(
    seed: int,
) -> None:
    pipe = pipeline()
    sizes, boxes, _ = batch(seed)
    draw = pipe.draw(sizes, np.arange(len(sizes)) + 100, seed=seed, epoch=2)
    kept, keep = pipe.targets.boxes(draw, boxes)
    assert len(keep) == len(boxes.xyxy)
    for j, size in enumerate(sizes):
        want = torchvision_boxes(pipe, draw, boxes, j, size)
        np.testing.assert_allclose(kept.of(j)[0], want.reshape(-1, 4), atol=1e-3)


def test_colour_and_blur_ops_leave_boxes_where_they_are() -> None:
    still = pipeline(
        {"op": "resize_center_crop", "resize": 128, "size": 128},
        [op for op in OPS if op["op"] not in ("hflip", "vflip")],
    )
    sizes = np.array([[128, 128], [128, 128]])
    boxes = Boxes.of_samples(
        [(np.array([[10, 20, 60, 90]]), np.array([1])), (np.zeros((0, 4)), np.zeros(0))]
    )
    draw = still.draw(sizes, [0, 1], seed=0, epoch=0)
    kept, keep = still.targets.boxes(draw, boxes)
    assert keep.tolist() == [True]
    np.testing.assert_allclose(kept.xyxy, boxes.xyxy)


@pytest.mark.parametrize("op", ["randaugment", "trivialaugment", "autoaugment"])
def test_an_op_that_moves_pixels_without_moving_boxes_is_refused_naming_it(op: str) -> None:
    pipe = pipeline(RRC, [{"op": "hflip"}, {"op": op}])
    with pytest.raises(ConfigError, match=f"^augment op {op} moves pixels but not boxes") as e:
        pipe.targets  # noqa: B018
    assert "\n" not in str(e.value)


def dali_masks(pipe: Pipeline, draw: Draw, masks: list[np.ndarray], fill: int) -> list[np.ndarray]:
    """The masks through the geometry and the ops in a DALI CPU graph, fed as the loader
    feeds the images' parameters."""
    from nvidia.dali import fn
    from nvidia.dali.pipeline import Pipeline as DaliPipeline

    g = draw.geometry
    anchor, shape = g.decode_window()
    start, end = g.nearest_roi()
    size = np.tile(np.asarray(g.out[::-1], np.float32), (len(masks), 1))
    columns = [
        [np.ascontiguousarray(m.transpose(1, 2, 0)) for m in masks],
        list(anchor),
        list(shape),
        list(start),
        list(end),
        list(g.inside().astype(np.float32)),
        list(size),
        *[list(a) for a in pipe.feed(draw)],
    ]
    graph = DaliPipeline(batch_size=len(masks), num_threads=1, device_id=None)
    with graph:
        nodes = fn.external_source(source=lambda: columns, num_outputs=len(columns), batch=True)
        masks_, anchor_, shape_, start_, end_, inside_, size_ = nodes[:7]
        moved = masks_through_geometry(masks_, anchor_, shape_, start_, end_, inside_, size_, fill)
        ctx = Context(size=g.out)
        graph.set_outputs(pipe.targets.masks_dali(moved, nodes[7:], ctx))
    graph.build()
    (out,) = graph.run()
    return [np.asarray(out.at(j)).transpose(2, 0, 1) for j in range(len(masks))]


def float_lines(start: int, count: int, size: int, resized: int) -> list[int]:
    """The output lines at which torch's nearest resize (float32: ``floor(r * (size /
    resized))``) picks another source line than exact arithmetic (``r * size // resized``):
    where the product is a whole number that float32 rounds down."""
    scale = np.float32(np.float32(size) / np.float32(resized))
    lines = np.arange(start, start + count)
    torch_pick = np.floor(lines.astype(np.float32) * scale).astype(np.int64)
    return [int(o) for o in np.flatnonzero(torch_pick != lines * size // resized)]


@pytest.mark.parametrize(
    ("crop", "fill"),
    [
        (RRC, 0),
        ({"op": "resize_center_crop", "resize": 110, "size": 96}, 0),
        ({"op": "random_crop", "size": 96, "padding": 24, "fill": 0}, 255),
    ],
    ids=["random-resized-crop", "resize-center-crop", "padded-random-crop"],
)
@pytest.mark.filterwarnings("ignore:The external source node")  # the colour ops' columns
def test_dali_cpu_masks_equal_the_torch_realisations(crop: dict[str, Any], fill: int) -> None:
    """Equal pixel for pixel, but on the lines where torch's float32 nearest resize rounds
    a whole-number position down (DALI samples the exact one); at least 99 % overall."""
    rng = np.random.default_rng(5)
    side = 100 if crop["op"] == "random_crop" else 300  # no resize: windows past the edge
    sizes = rng.integers(60, side, size=(8, 2))
    masks = [shapes(rng, int(h), int(w), 3)[0] for h, w in sizes]
    pipe = pipeline(crop)
    draw = pipe.draw(sizes, np.arange(len(sizes)), seed=3, epoch=1)
    got = dali_masks(pipe, draw, masks, fill)
    ctx = Context(size=draw.geometry.out)
    for j, mask in enumerate(masks):
        want = pipe.targets.mask_torch(torch.from_numpy(mask), draw, j, fill).numpy()
        assert got[j].shape == want.shape
        (_, _, w, h), (nh, nw), (top, left) = draw.geometry.row(j)
        (oh, ow) = draw.geometry.out
        loose = torch.zeros((1, oh, ow), dtype=torch.uint8)
        loose[:, float_lines(top, oh, h, nh), :] = 1
        loose[:, :, float_lines(left, ow, w, nw)] = 1
        for k, op in enumerate(pipe.ops):  # the same flips as the masks
            loose = op.move_mask_torch(loose, draw.row(k, j), ctx)
        differ = got[j] != want
        assert not (differ & ~loose.numpy().astype(bool)).any(), f"sample {j}"
        assert 1 - differ.mean() >= 0.99, f"sample {j}: {1 - differ.mean():.4f} agree"
