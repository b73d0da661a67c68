"""torchvision's detection transforms map to the ops that realise them: SSD's reference
pipeline (its photometric distortion before the crop, its zoom out's fill as torchvision
looks it up), the IoU crop with and without a resize, ``RandomShortestSize``,
``ScaleJitter`` alone, no geometry at all (the references' default presets),
``SanitizeBoundingBoxes``' smallest box; what cannot be mapped
exactly is refused in one line naming the transform."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2 as T

from dali_pipes.augment.from_torchvision import augment_spec, convert
from dali_pipes.errors import ConfigError

MEAN = (123.0, 117.0, 104.0)
TAIL = [T.ToDtype(torch.float, scale=True), T.SanitizeBoundingBoxes(min_size=2), T.ToPureTensor()]


def test_ssds_reference_pipeline_distorts_before_the_crop_and_pads_as_torchvision_does() -> None:
    reference_fill = defaultdict(lambda: MEAN, {tv_tensors.Mask: 0})
    steps = [T.ToImage(), T.RandomPhotometricDistort(), T.RandomZoomOut(fill=reference_fill)]
    spec = augment_spec(T.Compose([*steps, T.RandomIoUCrop(), T.RandomHorizontalFlip(), *TAIL]))
    pipeline = spec.pipeline(True)
    assert [op.name for op in pipeline.before] == ["photometric_distort"]
    assert [op.name for op in pipeline.ops] == ["hflip"]
    crop: Any = pipeline.crop
    assert crop.name == "iou_crop" and crop.size is None and crop.varies_in_size()
    # the reference's defaultdict is looked up with `in`: images pad with 0, not the mean
    assert crop.zoom_p == 0.5 and crop.fill == 0
    assert spec.min_box_size == 2.0 and spec.mean == (0.0, 0.0, 0.0) and spec.dtype == "float32"
    given = {tv_tensors.Image: list(MEAN), tv_tensors.Mask: 0}
    filled = augment_spec([T.ToImage(), T.RandomZoomOut(fill=given), T.RandomIoUCrop(), *TAIL])
    assert filled.pipeline(True).crop.fill == (123, 117, 104)  # type: ignore[attr-defined]


def test_the_references_hflip_and_eval_presets_keep_each_image_whole() -> None:
    """torchvision's detection references resize in the model: their default training
    preset is a flip alone and their evaluation preset has no geometry at all."""
    train = augment_spec(T.Compose([T.ToImage(), T.RandomHorizontalFlip(0.5), *TAIL]))
    pipeline = train.pipeline(True)
    assert pipeline.crop.name == "whole" and pipeline.crop.varies_in_size()
    assert [op.name for op in pipeline.ops] == ["hflip"]
    evaluation = augment_spec([T.ToImage(), T.ToDtype(torch.float, scale=True)])
    assert evaluation.pipeline(True).crop.name == "whole" and not evaluation.pipeline(True).ops
    geometry = pipeline.crop.plan(np.array([[180, 240], [300, 160]]), np.zeros((2, 0)), 0)
    assert geometry.outs is not None and geometry.outs.tolist() == [[180, 240], [300, 160]]
    assert geometry.window.tolist() == [[0, 0, 240, 180], [0, 0, 160, 300]]


def test_an_iou_crop_with_a_resize_gives_one_size_and_without_one_each_its_own() -> None:
    sized = convert([T.ToImage(), T.RandomIoUCrop(), T.Resize((300, 300)), *TAIL]).split
    assert sized.crop["op"] == "iou_crop" and list(sized.crop["size"]) == [300, 300]
    assert sized.crop["zoom_p"] == 0.0
    zoom = convert([T.ToImage(), T.RandomZoomOut(fill=0, p=1.0), *TAIL]).split.crop
    assert zoom["op"] == "iou_crop" and list(zoom["options"]) == [1.0] and zoom["zoom_p"] == 1.0


def test_multi_scale_resizes_map_to_shortest_size_and_scale_jitter() -> None:
    sides = (480, 512, 800)
    crop = convert([T.ToImage(), T.RandomShortestSize(sides, 1333), *TAIL]).split.crop
    assert crop["op"] == "shortest_size" and list(crop["min_size"]) == list(sides)
    assert crop["max_size"] == 1333
    jitter = convert([T.ToImage(), T.ScaleJitter((640, 480), (0.5, 1.5)), *TAIL]).split.crop
    assert jitter["op"] == "scale_jitter" and list(jitter["size"]) == [480, 640]
    assert jitter["crop"] is False


def test_scale_jitter_alone_gives_torchvisions_sizes() -> None:
    from dali_pipes.augment import parse_pipeline

    op = parse_pipeline({"op": "scale_jitter", "size": [480, 640], "crop": False}, {}, "k").crop
    sizes = np.random.default_rng(0).integers(100, 2000, size=(200, 2))
    u = np.random.default_rng(1).random((200, op.draws()))
    g = op.plan(sizes, u, 0)
    assert g.outs is not None and (g.outs == g.resize).all()
    lo, hi = 0.1, 2.0
    for j, (h, w) in enumerate(sizes):
        r = min(480 / h, 640 / w) * (lo + u[j, 0] * (hi - lo))
        assert abs(g.resize[j, 0] - int(h * r)) <= 1 and abs(g.resize[j, 1] - int(w * r)) <= 1


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            [T.ToImage(), T.RandomHorizontalFlip(), T.RandomIoUCrop()],
            r"^torchvision transform \[2\] RandomIoUCrop \(v2\): a resize or crop must come "
            r"before every image op \(\[1\] RandomHorizontalFlip \(v2\) comes before it\): it "
            r"is fused with decoding$",
        ),
        (
            [T.ToImage(), T.RandomIoUCrop(), T.Resize(300)],
            r"^torchvision transform \[2\] Resize \(v2\): Resize\(300\) after RandomIoUCrop",
        ),
        (
            [T.ToImage(), T.RandomZoomOut(fill={tv_tensors.Mask: 255, "others": 0})],
            r"^torchvision transform \[1\] RandomZoomOut \(v2\): fill=.* pads masks with 255; "
            r"masks pad with 0$",
        ),
        (
            [T.ToImage(), T.RandomIoUCrop(), T.SanitizeBoundingBoxes(min_area=4)],
            r"SanitizeBoundingBoxes \(v2\): min_area=4 is not supported",
        ),
        (
            [T.ToImage(), T.RandomIoUCrop(), T.ConvertBoundingBoxFormat("XYWH")],
            r"ConvertBoundingBoxFormat \(v2\): format=.*boxes come out as XYXY",
        ),
    ],
    ids=["flip-first", "resize-int", "mask-fill", "min-area", "xywh"],
)
def test_what_cannot_be_mapped_exactly_is_refused_in_one_line(
    steps: list[Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        convert(steps)
    assert "\n" not in str(caught.value)
