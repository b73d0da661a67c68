"""A mapped random transform draws its parameters from torchvision's distribution.

Each transform is mapped (``augment_spec``) and its op draws parameters for many samples
from the keyed hash of (seed, epoch, sample); torchvision's own ``get_params`` (or, for the
auto-augment policies, its forward pass with the operation recorded instead of applied)
draws as many from torch's generator. The two samples must agree: the two-sample
Kolmogorov-Smirnov distance for continuous parameters, the largest difference of
frequencies for discrete ones. Both sides are seeded, so the figures are fixed; the
thresholds sit well below what a wrong parameter gives (the last test shows a wrong scale
and a wrong probability caught).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.autoaugment as tv_auto

from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.batch import parse_batch
from dali_pipes.augment.from_torchvision import augment_spec
from dali_pipes.augment.pipeline import Draw

N = 20_000
SIZE = (300, 400)  # the source images' height, width
KS = 0.03  # same distribution: ~0.01 at n=20 000; a wrong parameter: >= 0.1
FREQ = 0.02


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov distance."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / len(a)
    fb = np.searchsorted(b, grid, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def freq_gap(a: np.ndarray, b: np.ndarray) -> float:
    """The largest difference of two samples' value frequencies."""
    values = np.union1d(a, b)
    fa = np.array([(a == v).mean() for v in values])
    fb = np.array([(b == v).mean() for v in values])
    return float(np.abs(fa - fb).max())


def ours(steps: list[Any], n: int = N, size: tuple[int, int] = SIZE) -> Draw:
    """The mapped pipeline's parameters for ``n`` samples of ``size``."""
    pipeline = augment_spec([*steps, T.ToTensor()]).pipeline(True)
    return pipeline.draw(np.tile(size, (n, 1)), np.arange(n), seed=7, epoch=3)


def theirs(fn: Any, n: int = N) -> np.ndarray:
    torch.manual_seed(0)
    return np.array([fn() for _ in range(n)], dtype=float)


def test_random_resized_crop_windows_follow_torchvisions() -> None:
    scale, ratio = (0.25, 0.9), (0.5, 1.5)
    g = ours([T.RandomResizedCrop(64, scale=scale, ratio=ratio)]).geometry
    image = torch.empty(3, *SIZE)
    tv = theirs(lambda: T.RandomResizedCrop.get_params(image, list(scale), list(ratio)))
    # torchvision: (top, left, height, width); ours: window (x, y, w, h)
    for column, theirs_column in ((0, 1), (1, 0), (2, 3), (3, 2)):
        assert ks(g.window[:, column], tv[:, theirs_column]) < KS


def test_random_crop_corners_with_padding_follow_torchvisions() -> None:
    g = ours([T.RandomCrop(32, padding=(3, 5))], size=(32, 40)).geometry
    padded = torch.empty(3, 32 + 10, 40 + 6)
    tv = theirs(lambda: T.RandomCrop.get_params(padded, (32, 32))[:2])
    assert freq_gap(g.window[:, 1], tv[:, 0] - 5) < FREQ  # top, in source pixels
    assert freq_gap(g.window[:, 0], tv[:, 1] - 3) < FREQ  # left
    assert g.fill == (0, 0, 0)


def test_color_jitter_order_and_factors_follow_torchvisions() -> None:
    jitter = T.ColorJitter(0.4, (0.5, 0.9), 0.3, 0.1)
    p = ours([T.CenterCrop(8), jitter]).params[0]
    bounds = (jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue)
    tv = theirs(lambda: [float(v) for v in np.hstack(T.ColorJitter.get_params(*bounds))])
    assert freq_gap(p["at0"], tv[:, 0]) < FREQ and freq_gap(p["at3"], tv[:, 3]) < FREQ
    for k, part in enumerate(("brightness", "contrast", "saturation", "hue")):
        assert ks(p[part], tv[:, 4 + k]) < KS, part


def test_gaussian_blur_sigma_follows_torchvisions() -> None:
    p = ours([T.CenterCrop(8), T.GaussianBlur(5, (0.2, 3.0))]).params[0]
    tv = theirs(lambda: T.GaussianBlur.get_params(0.2, 3.0))
    assert ks(p["sigma"], tv) < KS and p["apply"].all()


def test_random_erasing_boxes_follow_torchvisions() -> None:
    image = torch.empty(3, 48, 64)
    scale, ratio = (0.05, 0.4), (0.4, 2.5)
    spec = augment_spec([T.CenterCrop((48, 64)), T.ToTensor(), T.RandomErasing(1.0, scale, ratio)])
    [op], _ = parse_batch(spec.train.batch, "batch")
    boxes = op.draw(np.random.default_rng(5), N, (48, 64))["boxes"][:, 0]
    tv = theirs(lambda: T.RandomErasing.get_params(image, scale, ratio, [0.0])[:4])
    for k in range(4):  # top, left, height, width
        assert ks(boxes[:, k], tv[:, k]) < KS, k


@pytest.mark.parametrize(
    ("transform", "op", "name", "p"),
    [
        (T.RandomHorizontalFlip(0.3), 0, "flip", 0.3),
        (T.RandomVerticalFlip(0.7), 0, "flip", 0.7),
        (T.RandomGrayscale(0.2), 0, "gray", 0.2),
        (T.RandomSolarize(128, p=0.4), 0, "apply", 0.4),
        (T.RandomApply([T.ColorJitter(0.4)], p=0.6), 0, "apply", 0.6),
        (T.RandomApply([T.GaussianBlur(3), T.RandomGrayscale(1.0)], p=0.35), 0, "apply", 0.35),
        (T.RandomApply([T.RandomApply([T.RandomVerticalFlip(0.5)], p=0.5)], p=0.8), 0, "flip", 0.2),
    ],
)
def test_a_transforms_probability_is_torchvisions(
    transform: Any, op: int, name: str, p: float
) -> None:
    """torchvision applies these when ``torch.rand(1) < p``: a Bernoulli(p) draw each."""
    drawn = np.asarray(ours([T.CenterCrop(8), transform]).params[op][name], dtype=float)
    assert abs(drawn.mean() - p) < 4 * np.sqrt(p * (1 - p) / N)


def recorded(transform: Any, n: int, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """torchvision's own forward of an auto-augment transform on ``n`` 32x32 images, with
    each applied operation recorded as (name, magnitude) rather than applied (Identity left
    out; v1's Solarize threshold in grey levels as the fraction of 255 the op keeps)."""
    calls: list[tuple[str, float]] = []

    def record(img: Any, op_name: str, magnitude: float, **kwargs: Any) -> Any:
        if op_name != "Identity":
            calls.append((op_name, key(magnitude / 255 if op_name == "Solarize" else magnitude)))
        return img

    monkeypatch.setattr(tv_auto, "_apply_op", record)
    torch.manual_seed(0)
    image = torch.zeros(3, 32, 32, dtype=torch.uint8)
    out = []
    for _ in range(n):
        calls.clear()
        transform(image)
        out.append(list(calls))
    return out


def key(magnitude: float) -> float:
    """A magnitude to compare: float32 tables against float64 ones, -0.0 as 0.0."""
    return round(float(magnitude), 4) + 0.0


def our_slots(draw: Draw, prefixes: list[str]) -> list[list[Any]]:
    """Each sample's applied operations (Identity left out) as (name, magnitude)."""
    p = draw.params[0]
    names = auto.OPS
    out = []
    for j in range(len(p[f"{prefixes[0]}op"])):
        steps = [(names[int(p[f"{k}op"][j])], key(p[f"{k}magnitude"][j])) for k in prefixes]
        out.append([s for s in steps if s[0] != "Identity"])
    return out


def histogram(samples: list[list[Any]]) -> dict[Any, float]:
    counts: dict[Any, float] = {}
    for steps in samples:
        for step in steps:
            counts[step] = counts.get(step, 0) + 1 / len(samples)
    return counts


@pytest.mark.parametrize(
    ("transform", "prefixes"),
    [
        (T.RandAugment(num_ops=2, magnitude=9), ["0.", "1."]),
        (T.TrivialAugmentWide(num_magnitude_bins=5), [""]),
        (T.AutoAugment(T.AutoAugmentPolicy.IMAGENET), ["0.", "1."]),
    ],
    ids=["randaugment", "trivialaugment", "autoaugment"],
)
def test_auto_augment_policies_pick_torchvisions_operations_and_magnitudes(
    transform: Any, prefixes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frequency of each (operation, signed magnitude) applied per image; for
    AutoAugment the applied steps of a sub-policy, each with its probability."""
    n = 8000
    mine = histogram(our_slots(ours([T.CenterCrop(32), transform], n=n), prefixes))
    tv = histogram(recorded(transform, n, monkeypatch))
    keys = set(mine) | set(tv)
    gap = max(abs(mine.get(k, 0.0) - tv.get(k, 0.0)) for k in keys)
    assert gap < 0.02, sorted(keys - set(mine)) or sorted(keys - set(tv))
    assert sum(mine.values()) == pytest.approx(sum(tv.values()), abs=0.03)


def test_the_thresholds_catch_a_wrong_scale_or_probability() -> None:
    image = torch.empty(3, *SIZE)
    g = ours([T.RandomResizedCrop(64, scale=(0.08, 1.0))]).geometry
    tv = theirs(lambda: T.RandomResizedCrop.get_params(image, [0.2, 1.0], [3 / 4, 4 / 3]))
    assert ks(g.window[:, 2], tv[:, 3]) > 3 * KS
    flips = np.asarray(ours([T.CenterCrop(8), T.RandomHorizontalFlip(0.33)]).params[0]["flip"])
    assert abs(flips.mean() - 0.3) > 4 * np.sqrt(0.3 * 0.7 / N)
