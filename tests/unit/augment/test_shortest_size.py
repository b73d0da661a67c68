"""``shortest_size``: torchvision's ``RandomShortestSize`` sizes exactly, DETR's crop branch
within its ranges, padding to a multiple or a size, boxes moved as torchvision's kernels
move them, and what cannot follow it refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_pipes import compose_config
from dali_pipes.augment import parse_pipeline
from dali_pipes.augment.ops.shortest_size import ShortestSize
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.augment.targets.boxes import Boxes, through_geometry
from dali_pipes.config.specs import to_spec
from dali_pipes.errors import ConfigError

SIDES = (480, 512, 608, 800)


def sizes(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(50, 3000, size=(n, 2))


def test_sizes_are_torchvisions_random_shortest_size_for_the_drawn_side() -> None:
    op = ShortestSize(min_size=list(SIDES), max_size=1333)
    hw = sizes(400)
    u = np.random.default_rng(1).random((len(hw), op.draws()))
    g = op.plan(hw, u, 0)
    assert g.outs is not None and (g.outs == g.resize).all()
    picked = set()
    for j, (h, w) in enumerate(hw):
        side = SIDES[min(int(u[j, 0] * len(SIDES)), len(SIDES) - 1)]
        picked.add(side)
        want = v2.RandomShortestSize([side], 1333).make_params([torch.empty(0, h, w)])
        assert tuple(g.resize[j]) == want["size"], f"{h}x{w} at {side}"
    assert picked == set(SIDES)
    assert g.out == (int(g.outs[:, 0].max()), int(g.outs[:, 1].max()))


def test_without_a_maximum_the_shorter_side_is_the_drawn_one() -> None:
    op = ShortestSize(min_size=256, max_size=None)
    hw = sizes(50)
    g = op.plan(hw, np.random.default_rng(2).random((50, 7)), 0)
    for j, (h, w) in enumerate(hw):  # 255 where torchvision's int(side * r) truncates so
        want = v2.RandomShortestSize([256]).make_params([torch.empty(0, h, w)])
        assert tuple(g.resize[j]) == want["size"]
    assert (g.resize.min(axis=1) >= 255).all()


def test_the_crop_branch_is_detrs_size_crop_mapped_to_source_pixels() -> None:
    op = ShortestSize(min_size=[800], max_size=1333, crop_p=0.5, crop_sizes=[400, 600])
    hw = sizes(2000, seed=3)
    u = np.random.default_rng(4).random((len(hw), op.draws()))
    g = op.plan(hw, u, 0)
    cropped = u[:, 1] < 0.5
    whole = (g.window[:, 0] == 0) & (g.window[:, 1] == 0)
    whole &= (g.window[:, 2] == hw[:, 1]) & (g.window[:, 3] == hw[:, 0])
    assert whole[~cropped].all()
    assert 0.45 < cropped.mean() < 0.55
    x, y, w, h = (g.window[cropped, k] for k in range(4))
    assert (x >= 0).all() and (y >= 0).all() and (w >= 1).all() and (h >= 1).all()
    assert (x + w <= hw[cropped, 1]).all() and (y + h <= hw[cropped, 0]).all()
    # in the intermediate image (shorter side 400 or 600) the crop is 384-600 px a side
    mid = np.minimum(hw[cropped, 0], hw[cropped, 1])
    side = np.where(u[cropped, 2] < 0.5, 400, 600)
    scale = side / mid
    span_w, span_h = w * scale, h * scale
    tall_enough = (hw[cropped] * scale[:, None]).min(axis=1) >= 384
    assert (span_w[tall_enough] >= 384 - 2 * scale.max()).all()
    assert (span_w <= 600 + 2 + scale).all() and (span_h <= 600 + 2 + scale).all()
    # the window is then resized as the whole image would be
    assert (np.minimum(g.resize[cropped, 0], g.resize[cropped, 1]) <= 800).all()


def test_padding_rounds_each_image_up_to_a_multiple_or_to_one_size() -> None:
    hw = sizes(100, seed=5)
    u = np.random.default_rng(6).random((100, 7))
    g = ShortestSize(min_size=[500, 600], max_size=1000, pad_multiple=32).plan(hw, u, 0)
    assert g.outs is not None and (g.outs % 32 == 0).all()
    assert ((g.outs - g.resize >= 0) & (g.outs - g.resize < 32)).all()
    assert g.fill == (0, 0, 0)
    fixed = ShortestSize(min_size=[500, 600], max_size=1000, pad_to=1024, fill=[1, 2, 3])
    g = fixed.plan(hw, u, 0)
    assert g.outs is None and g.out == (1024, 1024) and g.fill == (1, 2, 3)
    assert not fixed.varies_in_size() and ShortestSize().varies_in_size()


def test_boxes_move_as_torchvisions_crop_and_resize_kernels_move_them() -> None:
    op = ShortestSize(
        min_size=[300, 400], max_size=700, crop_p=0.5, crop_sizes=[200], crop_range=[150, 250]
    )
    rng = np.random.default_rng(7)
    hw = rng.integers(200, 900, size=(40, 2))
    per_sample = []
    for h, w in hw:
        x1, y1 = rng.uniform(0, w - 20), rng.uniform(0, h - 20)
        box = [x1, y1, rng.uniform(x1 + 5, w), rng.uniform(y1 + 5, h)]
        per_sample.append((np.array([box], np.float32), np.array([1])))
    boxes = Boxes.of_samples(per_sample)
    g = op.plan(hw, rng.random((len(hw), op.draws())), 0)
    ours = through_geometry(boxes, g)
    for j, (h, w) in enumerate(hw):
        (x, y, ww, wh), resize, _ = g.row(j)
        theirs = tv_tensors.BoundingBoxes(
            torch.from_numpy(per_sample[j][0]), format="XYXY", canvas_size=(int(h), int(w))
        )
        theirs = F.crop(theirs, y, x, wh, ww)  # torchvision clamps to the crop
        theirs = F.resize(theirs, list(resize))
        got = np.clip(ours.of(j)[0], 0, [resize[1], resize[0], resize[1], resize[0]])
        np.testing.assert_allclose(got, theirs.numpy(), atol=1e-3)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["+augment.train.ops.randaugment={}"],
            r"^augment\.train\.ops\.randaugment: randaugment draws for one image size, but "
            r"shortest_size gives each image its own; set its pad_to or remove randaugment$",
        ),
        (
            ["+augment.train.batch.random_erasing={p: 0.25}"],
            r"^augment\.train\.batch=\['random_erasing'\] is invalid: batch ops need one "
            r"image size",
        ),
        (
            ["augment.channels_last=true"],
            r"^augment\.channels_last=True is invalid: .*set it false$",
        ),
        (
            ["augment.train.crop.pad_to=1000"],
            r"^augment\.train\.crop\.pad_to=1000 is invalid: expected both sides >= max_size=1333$",
        ),
        (
            ["augment.train.crop.max_size=null", "augment.train.crop.pad_to=2000"],
            r"pad_to=2000 is invalid: padding every image to one size needs max_size",
        ),
    ],
    ids=["sized-op", "batch-op", "channels-last", "pad-too-small", "pad-without-max"],
)
def test_what_needs_one_image_size_is_refused_in_one_line(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        to_spec(compose_config(["augment=detr", *overrides]).augment, AugmentSpec)
    assert "\n" not in str(caught.value)


def test_the_torchvision_form_is_random_shortest_size_or_a_choice_with_the_crop_branch() -> None:
    plain = parse_pipeline({"op": "shortest_size", "min_size": [480, 800]}, {}, "k").crop
    assert isinstance(plain.torchvision(), v2.RandomShortestSize)
    detr = parse_pipeline({"op": "shortest_size", "crop_p": 0.5}, {}, "k").crop
    choice = detr.torchvision()
    assert isinstance(choice, v2.RandomChoice) and choice.p == [0.5, 0.5]
    image = tv_tensors.Image(torch.zeros(3, 700, 900, dtype=torch.uint8))
    for seed in range(5):  # the crop branch runs on torchvision's kernels
        torch.manual_seed(seed)
        short, long = sorted(choice.transforms[1](image).shape[-2:])
        # the shorter side 800 (799 where torchvision's int(side * r) truncates), or the
        # longer at its maximum
        assert short in (799, 800) or long == 1333, (short, long)
