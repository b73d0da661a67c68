"""Parity per op: DALI on the CPU vs the torch backend on the real photos.

Each op's random parameters are drawn once in NumPy from (seed, epoch, sample) and fed to
both backends, so the comparison is with the same parameters. Outputs are compared on the
0-255 scale. The bounds, each with its reason, are :mod:`dali_pipes.selfcheck.bounds`
(set from the measurement on the 213 shared photos; figures printed by the test and
recorded in benchmarks/RESULTS.md). Without ../shared the tests run on the 13 photos
shipped in the package with the same bounds (Equalize's share of values off by > 16
excepted: ``ON_SHIPPED_PHOTOS``).

A wrong parameter on one side (another operation, another magnitude, a wider range)
moves the mean to 1 and above and puts values far off, which the bounds catch (tested).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import BUNDLED_PHOTOS, gpu

from dali_pipes.augment.ops.randaugment import OPERATIONS
from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends import create_loader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec, TorchBackend
from dali_pipes.data.sources import discover_folder
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.selfcheck.bounds import (
    COLOR_JITTER,
    EXACT,
    GPU_POLICY_VS_CPU,
    ON_SHIPPED_PHOTOS,
    OPERATION,
    POLICY,
    Bound,
    figures,
)

RANDAUGMENT = {"hflip": {}, "randaugment": {"num_ops": 2, "magnitude": 9, "mstd": 0.5}}
JITTER = {"color_jitter": {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1}}
CASES: dict[str, tuple[dict[str, Any], Bound]] = {
    "hflip": ({"hflip": {}}, EXACT),
    "grayscale": ({"grayscale": {"p": 0.5}}, EXACT),
    "gaussian_blur": ({"gaussian_blur": {"kernel_size": 23, "sigma": [0.1, 2.0]}}, EXACT),
    "color_jitter": (JITTER, COLOR_JITTER),
    "photometric_distort": ({"photometric_distort": {"p": 0.5}}, COLOR_JITTER),
    "randaugment": (RANDAUGMENT, POLICY),
    "trivialaugment": ({"hflip": {}, "trivialaugment": {}}, POLICY),
    "autoaugment": ({"hflip": {}, "autoaugment": {}}, POLICY),
}
for _name in OPERATIONS:
    _ops = {"randaugment": {"num_ops": 1, "magnitude": 9, "operations": [_name]}}
    CASES[f"randaugment[{_name}]"] = (_ops, OPERATION.get(_name, EXACT))

_DALI: dict[str, torch.Tensor] = {}  # DALI's output per case, shared with the wrong-parameter test


def stride(root: Path, case: str) -> int:
    """Every photo for the ops; for the single RandAugment operations (the ``randaugment[...]``
    cases) every third of the 213 shared photos, to keep the suite short, and all of the 13
    committed ones."""
    return 3 if "[" in case and len(discover_folder(root).files) > 100 else 1


def run(
    root: Path, case: str, ops: dict[str, Any], backend: DaliBackend | TorchBackend
) -> torch.Tensor:
    augment = AugmentSpec(
        train=SplitAugment(ops=ops), mean=(0.0, 0.0, 0.0), std=(1 / 255, 1 / 255, 1 / 255)
    )
    spec = LoaderSpec(
        source=discover_folder(root),
        train=True,
        batch_size=16,
        augment=augment,
        sampling=SamplingSpec(seed=3, shuffle=False, world_size=stride(root, case)),
        backend=backend,
    )
    with create_loader(spec) as loader:
        return torch.cat([images.float().cpu() for images, _ in loader])


def dali(root: Path, case: str) -> torch.Tensor:
    if case not in _DALI:
        _DALI[case] = run(root, case, CASES[case][0], DaliBackend(device="cpu"))
    return _DALI[case]


def within(measured: Bound, bound: Bound) -> bool:
    return bound.admits(measured)


@pytest.mark.parametrize("case", list(CASES))
def test_each_op_on_dali_cpu_matches_the_torch_backend_on_real_photos(
    case: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops, bound = CASES[case]
    if real_photos == BUNDLED_PHOTOS:
        bound = ON_SHIPPED_PHOTOS.get(case, bound)
    ours = dali(real_photos, case)
    reference = run(real_photos, case, ops, TorchBackend(device="cpu", num_workers=2))
    every = math.ceil(len(discover_folder(real_photos).files) / stride(real_photos, case))
    assert ours.shape == reference.shape and len(ours) == every  # 213 or 71 from ../shared
    measured = figures(ours, reference)
    with capsys.disabled():
        print(
            f"\nop parity {case}: mean {measured.mean:.3f}, max {measured.max:.0f}, "
            f"{measured.over16:.4f} % over 16 levels (bound {bound})"
        )
    assert within(measured, bound), f"{measured} exceeds {bound}"


WRONG: dict[str, tuple[str, dict[str, Any]]] = {
    "randaugment magnitude 9 -> 10": (
        "randaugment",
        {"hflip": {}, "randaugment": {"num_ops": 2, "magnitude": 10, "mstd": 0.5}},
    ),
    "randaugment Rotate -> ShearX": (
        "randaugment[Rotate]",
        {"randaugment": {"num_ops": 1, "magnitude": 9, "operations": ["ShearX"]}},
    ),
    "color_jitter hue 0.1 -> 0.12": (
        "color_jitter",
        {"color_jitter": {**JITTER["color_jitter"], "hue": 0.12}},
    ),
    "gaussian_blur sigma up to 2.5": (
        "gaussian_blur",
        {"gaussian_blur": {"kernel_size": 23, "sigma": [0.1, 2.5]}},
    ),
}


@pytest.mark.parametrize("wrong", list(WRONG))
def test_the_bounds_catch_a_wrong_parameter_fed_to_one_backend(
    wrong: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case, ops = WRONG[wrong]
    measured = figures(
        dali(real_photos, case), run(real_photos, case, ops, TorchBackend(device="cpu"))
    )
    with capsys.disabled():
        print(f"\nwrong parameter ({wrong}): {measured}")
    assert not within(measured, CASES[case][1])


@gpu
@pytest.mark.slow
def test_randaugment_on_the_gpu_matches_the_cpu_without_equalize(real_photos: Path) -> None:
    """nvJPEG decodes differently (test_parity's GPU bounds) and the GPU's equalize is
    DALI's own (OpenCV's table), so it is left out here. Provisional bounds: not yet run
    on a GPU; set them from the first measurement."""
    ops = {
        "hflip": {},
        "randaugment": {
            "num_ops": 2,
            "magnitude": 9,
            "operations": [n for n in OPERATIONS if n != "Equalize"],
        },
    }
    measured = figures(
        run(real_photos, "randaugment", ops, DaliBackend(device="gpu")),
        run(real_photos, "randaugment", ops, DaliBackend(device="cpu")),
    )
    print(f"randaugment GPU vs CPU: {measured}")
    assert within(measured, GPU_POLICY_VS_CPU)
