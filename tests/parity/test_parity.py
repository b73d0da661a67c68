"""DALI vs the torch backend on real photos: same geometry, only resampling may differ.

Both backends take their crop windows, resize sizes and flips from
``dali_pipes.augment.geometry`` for the same (seed, epoch, sample), so the training comparison is
with the random parameters fixed and fed to both. Outputs are compared on the 0-255 scale
(mean 0, std 1/255). The bounds are the issue's; the measured figures are printed. The
photos are ``../shared/data/photos`` where it exists, else the 13 shipped in
dali_pipes/selfcheck/photos; the test that a window one pixel off breaks the bounds always uses the
committed ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import BUNDLED_PHOTOS, gpu

from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.ops.flip import HorizontalFlip
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import create_loader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec, TorchBackend
from dali_pipes.data.sources import discover_folder
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH, DALI_GPU_VS_CPU

# Bounds, with their reasons: dali_pipes.selfcheck.bounds. DALI on the CPU vs the torch
# backend: mean |diff| and the largest difference, grey levels; the GPU vs the CPU by
# fancy_upsampling, also the share of values off by > 16 levels (a geometry mismatch moves
# the mean to ~5).
CPU_BOUNDS = (DALI_CPU_VS_TORCH.mean, DALI_CPU_VS_TORCH.max)

RAW = AugmentSpec(mean=(0.0, 0.0, 0.0), std=(1 / 255, 1 / 255, 1 / 255))


def batches(root: Path, train: bool, backend: DaliBackend | TorchBackend) -> torch.Tensor:
    spec = LoaderSpec(
        source=discover_folder(root),
        train=train,
        batch_size=16,
        augment=RAW,
        sampling=SamplingSpec(seed=11, shuffle=False),
        backend=backend,
    )
    with create_loader(spec) as loader:
        return torch.cat([images.float().cpu() for images, _ in loader])


def report(
    name: str, a: torch.Tensor, b: torch.Tensor, capsys: pytest.CaptureFixture[str]
) -> tuple[float, float, float, float]:
    """Mean |diff|, worst file's mean, max, and the share of values off by > 16 levels."""
    diff = (a - b).abs()
    per_file = diff.flatten(1).mean(dim=1)
    figures = (diff.mean().item(), per_file.max().item(), diff.max().item())
    over = [(diff > level).float().mean().item() for level in (1, 4, 16)]
    with capsys.disabled():
        print(
            f"\nparity {name}: {len(a)} photos, mean |diff| {figures[0]:.3f}, "
            f"worst file {figures[1]:.3f}, max {figures[2]:.0f} grey levels; values over "
            f"1/4/16 levels: {100 * over[0]:.3f}/{100 * over[1]:.4f}/{100 * over[2]:.5f} %"
        )
    return (*figures, over[2])


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_dali_cpu_matches_torch_backend_on_real_photos(
    train: bool, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dali = batches(real_photos, train, DaliBackend(device="cpu"))
    ref = batches(real_photos, train, TorchBackend(device="cpu", num_workers=2))
    assert dali.shape == ref.shape
    mean, _, worst, _ = report(
        f"dali-cpu vs torch ({'train' if train else 'eval'})", dali, ref, capsys
    )
    assert mean <= CPU_BOUNDS[0]
    assert worst <= CPU_BOUNDS[1]


def _window_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch backend's window one source pixel to the right (clipped at the image's
    right edge: in evaluation the window is the whole image)."""
    row = Geometry.row

    def shifted(self: Geometry, j: int) -> Any:
        (x, y, w, h), resize, crop = row(self, j)
        return (x + 1, y, w, h), resize, crop

    monkeypatch.setattr(Geometry, "row", shifted)


def _roi_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """DALI's resize ROI one window pixel to the right."""
    roi = Geometry.roi

    def shifted(self: Geometry) -> tuple[np.ndarray, np.ndarray]:
        start, end = roi(self)
        right = np.array([0, 1], dtype=np.float32)  # (y, x)
        return start + right, end + right

    monkeypatch.setattr(Geometry, "roi", shifted)


def _flip_inverted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch backend mirrors exactly the samples it should not."""
    flip = HorizontalFlip.torch

    def inverted(self: HorizontalFlip, image: torch.Tensor, p: Any, ctx: Any) -> torch.Tensor:
        return flip(self, image, {**p, "flip": 1 - int(p["flip"])}, ctx)

    monkeypatch.setattr(HorizontalFlip, "torch", inverted)


WRONG_GEOMETRY = {
    "torch window 1 px right": ("torch", _window_right),
    "dali roi 1 px right": ("dali", _roi_right),
    "torch flips inverted": ("torch", _flip_inverted),
}
_RIGHT: dict[tuple[str, bool], torch.Tensor] = {}  # the unpatched side, per backend and split


def _committed(backend: str, train: bool) -> torch.Tensor:
    if backend == "dali":
        return batches(BUNDLED_PHOTOS, train, DaliBackend(device="cpu"))
    return batches(BUNDLED_PHOTOS, train, TorchBackend(device="cpu", num_workers=0))


@pytest.mark.parametrize(
    ("train", "wrong"),
    [
        pytest.param(train, wrong, id=f"{'train' if train else 'eval'}-{wrong}")
        for train in (False, True)
        for wrong in WRONG_GEOMETRY
        if train or "flip" not in wrong  # evaluation does not flip
    ],
)
def test_a_window_one_pixel_off_or_a_wrong_flip_breaks_the_parity_bounds(
    train: bool, wrong: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The committed photos have texture: moving one side's crop window (the torch
    realisation's window, or DALI's resize ROI) by a single pixel, or mirroring the wrong
    samples, takes the comparison far outside the bounds above, in a bare clone too. The
    torch backend runs in this process (no workers), so the patch reaches it."""
    broken, patch = WRONG_GEOMETRY[wrong]
    right = "torch" if broken == "dali" else "dali"
    if (right, train) not in _RIGHT:
        _RIGHT[right, train] = _committed(right, train)
    patch(monkeypatch)
    wrong_side = _committed(broken, train)
    name = f"{wrong} ({'train' if train else 'eval'})"
    mean, _, worst, _ = report(name, wrong_side, _RIGHT[right, train], capsys)
    assert mean > CPU_BOUNDS[0] and worst > CPU_BOUNDS[1]


def test_training_geometry_is_random_but_fixed_by_seed_epoch_and_sample() -> None:
    sizes = [[480, 640]] * 64
    pipeline = RAW.pipeline(train=True)
    da = pipeline.draw(sizes, list(range(64)), seed=11, epoch=0)
    db = pipeline.draw(sizes, list(range(64)), seed=11, epoch=0)
    dc = pipeline.draw(sizes, list(range(64)), seed=11, epoch=1)
    a, b, c = da.geometry, db.geometry, dc.geometry
    flip_a, flip_b = da.params[0]["flip"], db.params[0]["flip"]
    assert (a.window == b.window).all() and (flip_a == flip_b).all()
    assert len({tuple(w) for w in a.window}) > 32, "windows should vary between samples"
    assert 0 < flip_a.sum() < 64
    assert not (a.window == c.window).all()


def test_full_decode_then_crop_equals_region_decode_on_the_cpu(real_photos: Path) -> None:
    """Decode whole, then slice (the GPU path with fancy upsampling) equals ROI decoding."""
    region = batches(real_photos, True, DaliBackend(device="cpu", roi_decode=True))
    whole = batches(real_photos, True, DaliBackend(device="cpu", roi_decode=False))
    assert torch.equal(region, whole)


_ON_CPU: dict[tuple[Path, bool], torch.Tensor] = {}  # DALI on the CPU, per photo set and split


@gpu
@pytest.mark.slow
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("fancy", [True, False], ids=["libjpeg-upsampling", "nvjpeg-upsampling"])
def test_dali_gpu_matches_dali_cpu_on_real_photos(
    train: bool, fancy: bool, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nvJPEG (hardware and CUDA decoders) vs libjpeg-turbo, the rest of the pipeline equal."""
    on_gpu = batches(real_photos, train, DaliBackend(device="gpu", fancy_upsampling=fancy))
    if (real_photos, train) not in _ON_CPU:  # the same for both upsamplings: made once
        _ON_CPU[real_photos, train] = batches(real_photos, train, DaliBackend(device="cpu"))
    on_cpu = _ON_CPU[real_photos, train]
    assert on_gpu.shape == on_cpu.shape
    name = f"dali-gpu ({'fancy' if fancy else 'nvjpeg'} upsampling) vs dali-cpu"
    mean, _, worst, off = report(f"{name} ({'train' if train else 'eval'})", on_gpu, on_cpu, capsys)
    bound = DALI_GPU_VS_CPU[fancy]
    assert mean <= bound.mean
    assert worst <= bound.max
    assert 100 * off <= bound.over16
