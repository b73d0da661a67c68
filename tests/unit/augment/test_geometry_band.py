"""A padded window resized in its band (the decoded region inside the image, padded to the
band, resized, placed on the fill) gives the whole padded window's resize, for SSD's zoomed
out crops, a padded random crop and large-scale jitter's crops padded past the resized
image, with the linear and the cubic filter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dali_pipes.augment.geometry import Geometry, plan_random_crop
from dali_pipes.augment.geometry_band import band
from dali_pipes.augment.geometry_torch import window_of
from dali_pipes.augment.ops.fixed_size import ScaleJitter
from dali_pipes.augment.ops.iou_crop import IoUCrop
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.image.resample import resize_window

FILL = (123, 117, 104)


def region(image: np.ndarray, window: np.ndarray) -> np.ndarray:
    """``window`` (x, y, w, h) of an HWC image, padded with the fill past its edge."""
    x, y, w, h = (int(v) for v in window)
    chw = torch.from_numpy(image).permute(2, 0, 1)
    return window_of(chw, (x, y, w, h), FILL).permute(1, 2, 0).contiguous().numpy()


def whole(image: np.ndarray, g: Geometry) -> np.ndarray:
    """The whole padded window resized; output pixels past the resized window the fill."""
    start, end = g.roi()
    inside = g.inside()[0]
    end = start + (end - start) * inside / np.asarray(g.out)  # the part inside, same step
    resized = np.empty((*inside, 3), np.uint8)
    resize_window(
        region(image, g.window[0]), start[0], end[0], resized, g.interpolation == "bicubic"
    )
    out = np.empty((*g.out, 3), np.uint8)
    out[:] = FILL
    out[: inside[0], : inside[1]] = resized
    return out


def banded(image: np.ndarray, g: Geometry) -> tuple[np.ndarray, float]:
    """The band realisation, and the share of the output it resized."""
    b = band(g, np.array([image.shape[:2]]))
    rx, ry = b.region[0].astype(int)
    rw, rh = b.region_shape[0].astype(int)
    assert 0 <= rx and rx + rw <= image.shape[1] and 0 <= ry and ry + rh <= image.shape[0]
    decoded = image[ry : ry + rh, rx : rx + rw]  # what the region decode gives
    part = region(decoded, np.concatenate([b.anchor[0], b.shape[0]]))
    oh, ow = b.out[0].astype(int)
    resized = np.empty((oh, ow, 3), np.uint8)
    resize_window(part, b.roi_start[0], b.roi_end[0], resized, g.interpolation == "bicubic")
    out = np.empty((*g.out, 3), np.uint8)
    out[:] = FILL
    px, py = (-b.place[0]).astype(int)
    out[py : py + oh, px : px + ow] = resized
    return out, oh * ow / (g.out[0] * g.out[1])


def geometries(rng: np.random.Generator, h: int, w: int) -> list[Geometry]:
    sizes = np.array([[h, w]])
    ssd = IoUCrop(size=160, zoom_p=1.0, fill=list(FILL))
    boxes = Boxes.of_samples([(np.array([[w * 0.3, h * 0.3, w * 0.6, h * 0.7]]), np.array([1]))])
    padded = plan_random_crop(
        sizes, rng.random((1, 2)), None, (96, 128), (40, 30, 40, 30), True, FILL
    )
    lsj = ScaleJitter(size=160, scale_range=[0.1, 2.0], fill=list(FILL))
    jittered = lsj.plan(sizes, rng.random((1, lsj.draws())), 0)  # padded after its resize
    return [ssd.plan_around(sizes, rng.random((1, ssd.draws())), 0, boxes), padded, jittered]


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_the_band_resized_and_placed_equals_the_whole_padded_windows_resize(
    interpolation: str,
) -> None:
    rng = np.random.default_rng(0)
    shares = []
    for _ in range(30):
        h, w = (int(v) for v in rng.integers(60, 700, 2))
        image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for g in geometries(rng, h, w):
            g = Geometry(g.window, g.resize, g.crop, g.out, g.fill, interpolation)
            got, share = banded(image, g)
            diff = np.abs(got.astype(int) - whole(image, g).astype(int))
            assert diff.max() <= 1, f"window {g.window[0]} of a {h}x{w} image"
            shares.append(share)
    assert min(shares) < 0.5  # zoomed-out windows do resize less than the whole output
