"""Each op's torch realisation is torchvision's, and its sampler draws torchvision's distribution.

The torch backend is the parity reference, so its ops must be exactly what a torchvision
user gets: the same functional calls with the same arguments. The magnitude tables are
compared with torchvision's own; the samplers with the distributions torchvision draws from.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from conftest import BUNDLED_PHOTOS
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2

from dali_pipes.augment import Context
from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.keyed import uniforms
from dali_pipes.augment.ops.autoaugment import AutoAugment
from dali_pipes.augment.ops.color_jitter import ColorJitter
from dali_pipes.augment.ops.flip import HorizontalFlip
from dali_pipes.augment.ops.gaussian_blur import GaussianBlur
from dali_pipes.augment.ops.grayscale import Grayscale
from dali_pipes.augment.ops.randaugment import RandAugment
from dali_pipes.augment.ops.trivialaugment import TrivialAugment

PHOTOS = BUNDLED_PHOTOS  # the 13 real photos shipped in the package, 3 classes
SIZE = (96, 120)  # height, width: not square, so width and height cannot be swapped
CTX = Context(size=SIZE)


@pytest.fixture(scope="module")
def images() -> list[torch.Tensor]:
    """Real photos (committed to the repository), cropped to SIZE."""
    out = []
    for path in sorted(PHOTOS.glob("*/*.jpg")):
        image = decode_jpeg(read_file(str(path)), mode=ImageReadMode.RGB)
        out.append(F.resized_crop(image, 10, 20, 300, 360, list(SIZE), antialias=True))
    return out


def draw(op: object, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    u = uniforms(seed, 0, np.arange(n), op.draws())  # type: ignore[attr-defined]
    return op.sample(u, CTX)  # type: ignore[attr-defined]


def row(params: dict[str, np.ndarray], j: int) -> dict[str, object]:
    return {k: v[j] for k, v in params.items()}


# --------------------------------------------------------------------------- auto ops


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("fill", [0, 128])
@pytest.mark.parametrize("name", auto.OPS)
def test_each_auto_augment_operation_is_torchvisions(
    name: str, interpolation: str, fill: int, images: list[torch.Tensor]
) -> None:
    """Our dispatch equals torchvision's ``_apply_image_or_video_transform`` exactly."""
    tv = v2.AutoAugment(interpolation=interpolation, fill=None if fill == 0 else fill)
    table = auto.STANDARD[name]
    values = [0.0] if table is None else list(table.value(np.array([3.0, 7.0]), 10, SIZE))
    for magnitude in values + [-v for v in values if table is not None and table.signed]:
        for image in images[:3]:
            ours = auto.apply_torch(image, auto.OP_INDEX[name], magnitude, interpolation, fill)
            theirs = tv._apply_image_or_video_transform(
                image, name, magnitude, interpolation=tv.interpolation, fill=tv._fill
            )
            assert torch.equal(ours, theirs), (name, magnitude)


@pytest.mark.parametrize(
    ("ours", "theirs", "bins"),
    [
        (auto.STANDARD, v2.RandAugment._AUGMENTATION_SPACE, 31),
        (auto.STANDARD, v2.AutoAugment._AUGMENTATION_SPACE, 10),
        (auto.WIDE, v2.TrivialAugmentWide._AUGMENTATION_SPACE, 31),
    ],
    ids=["randaugment", "autoaugment", "trivialaugment"],
)
def test_magnitude_tables_are_torchvisions(ours: dict, theirs: dict, bins: int) -> None:
    for name, (table, signed) in theirs.items():
        expected = table(bins, SIZE[0], SIZE[1])
        rng = ours[name]
        if expected is None:
            assert rng is None, name
            continue
        got = rng.value(np.arange(bins, dtype=np.float64), bins, SIZE)
        assert np.allclose(got, expected.double().numpy(), atol=1e-5), name
        assert rng.signed == signed, name
    assert set(theirs) <= set(ours)


def test_randaugment_draws_torchvisions_distribution_and_timms_noise() -> None:
    n = 14_000
    plain = draw(RandAugment(num_ops=1, magnitude=9), n)
    counts = np.bincount(plain["0.op"], minlength=len(auto.OPS))
    used = [auto.OP_INDEX[name] for name in v2.RandAugment._AUGMENTATION_SPACE]
    assert counts[auto.OP_INDEX["Invert"]] == 0, "RandAugment has no Invert"
    assert np.all(np.abs(counts[used] - n / 14) < 0.15 * n / 14), counts
    rotate = plain["0.op"] == auto.OP_INDEX["Rotate"]
    assert np.allclose(np.abs(plain["0.magnitude"][rotate]), 9.0)  # 30 degrees * 9 / 30
    assert abs((plain["0.magnitude"][rotate] < 0).mean() - 0.5) < 0.06
    noisy = draw(RandAugment(num_ops=1, magnitude=9, mstd=0.5), n)
    degrees = np.abs(noisy["0.magnitude"][noisy["0.op"] == auto.OP_INDEX["Rotate"]])
    assert abs(degrees.mean() - 9.0) < 0.05 and abs(degrees.std() - 0.5) < 0.05
    uniform = draw(RandAugment(num_ops=1, magnitude=9, mstd=float("inf")), n)
    degrees = np.abs(uniform["0.magnitude"][uniform["0.op"] == auto.OP_INDEX["Rotate"]])
    assert degrees.max() <= 9.0 and abs(degrees.mean() - 4.5) < 0.3
    two = draw(RandAugment(num_ops=2), 1000)
    assert (two["0.op"] != two["1.op"]).mean() > 0.85, "the two operations are drawn apart"


def test_trivialaugment_picks_operation_and_bin_uniformly() -> None:
    n = 14_000
    params = draw(TrivialAugment(), n)
    counts = np.bincount(params["op"], minlength=len(auto.OPS))
    used = [auto.OP_INDEX[name] for name in v2.TrivialAugmentWide._AUGMENTATION_SPACE]
    assert np.all(np.abs(counts[used] - n / 14) < 0.15 * n / 14)
    rotate = np.abs(params["magnitude"][params["op"] == auto.OP_INDEX["Rotate"]])
    bins = np.rint(rotate / (135.0 / 30)).astype(int)
    assert set(bins) == set(range(31))


def test_autoaugment_picks_sub_policies_uniformly_and_applies_steps_with_their_probability() -> (
    None
):
    op = AutoAugment()
    ops, prob, _ = op._table()
    n = 25_000
    u = uniforms(0, 0, np.arange(n), op.draws())
    params = op.sample(u, CTX)
    pick = (u[:, 0] * len(ops)).astype(int)
    applied = params["0.op"] != auto.OP_INDEX["Identity"]
    # Sub-policy 0 is (Posterize 0.4, Rotate 0.6).
    assert abs(applied[pick == 0].mean() - prob[0, 0]) < 0.06
    assert np.all(params["0.op"][(pick == 0) & applied] == ops[0, 0])
    assert abs(np.bincount(pick).std() / (n / 25)) < 0.1


# --------------------------------------------------------------------------- other ops


def test_color_jitter_is_torchvisions_for_the_same_parameters(images: list[torch.Tensor]) -> None:
    tv = v2.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    ours = ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    torch.manual_seed(0)
    for image in images:
        params = tv.make_params([image])
        p: dict[str, object] = {f"at{k}": int(params["fn_idx"][k]) for k in range(4)}
        for part in ("brightness", "contrast", "saturation", "hue"):
            p[part] = np.float32(params[f"{part}_factor"])
        p["apply"] = True
        assert torch.equal(ours.torch(image, p, CTX), tv.transform(image, params))


def test_color_jitter_draws_a_random_order_and_factors_in_torchvisions_ranges() -> None:
    op = ColorJitter(brightness=0.4, contrast=(0.5, 0.9), saturation=0, hue=0.1, p=0.8)
    params = draw(op, 6000)
    order = np.stack([params[f"at{k}"] for k in range(4)], axis=1)
    assert np.all(np.sort(order, axis=1) == np.arange(4))
    assert len({tuple(o) for o in order}) == 24, "every order occurs"
    assert params["brightness"].min() >= 0.6 and params["brightness"].max() <= 1.4
    assert params["contrast"].min() >= 0.5 and params["contrast"].max() <= 0.9
    assert np.all(np.abs(params["hue"]) <= 0.1)
    assert op.ranges[2] is None, "saturation 0 is skipped, as torchvision does"
    assert abs(params["apply"].mean() - 0.8) < 0.03


def test_grayscale_flip_and_blur_are_torchvisions(images: list[torch.Tensor]) -> None:
    for image in images:
        assert torch.equal(
            Grayscale(p=1.0).torch(image, {"gray": True}, CTX),
            v2.RandomGrayscale(p=1.0)(image),
        )
        assert torch.equal(
            HorizontalFlip().torch(image, {"flip": 1}, CTX), v2.RandomHorizontalFlip(1.0)(image)
        )
        blur = v2.GaussianBlur(9, (1.3, 1.3))
        ours = GaussianBlur(kernel_size=9, sigma=1.3).torch(
            image, {"sigma": np.float32(1.3), "apply": True}, CTX
        )
        assert torch.equal(ours, blur.transform(image, {"sigma": [float(np.float32(1.3))] * 2}))


def test_probabilities_are_honoured() -> None:
    n = 10_000
    assert abs(draw(HorizontalFlip(p=0.3), n)["flip"].mean() - 0.3) < 0.02
    assert abs(draw(Grayscale(p=0.2), n)["gray"].mean() - 0.2) < 0.02
    blur = draw(GaussianBlur(sigma=(0.1, 2.0), p=0.5), n)
    assert abs(blur["apply"].mean() - 0.5) < 0.02
    assert blur["sigma"].min() >= 0.1 and blur["sigma"].max() <= 2.0


def test_ops_have_the_torchvision_transform_a_user_would_write() -> None:
    assert isinstance(RandAugment().torchvision(), v2.RandAugment)
    assert isinstance(TrivialAugment().torchvision(), v2.TrivialAugmentWide)
    assert isinstance(AutoAugment().torchvision(), v2.AutoAugment)
    assert isinstance(ColorJitter(brightness=0.4).torchvision(), v2.ColorJitter)
    assert isinstance(ColorJitter(brightness=0.4, p=0.8).torchvision(), v2.RandomApply)
    assert isinstance(GaussianBlur().torchvision(), v2.GaussianBlur)
