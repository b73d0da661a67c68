"""The compiled CPU kernel of the auto-augment slots computes torchvision's operations.

DALI on the CPU runs RandAugment's, TrivialAugment's and AutoAugment's slots through
:mod:`dali_pipes.augment.auto.kernel` (one numba kernel per slot instead of a conditional
graph of DALI arithmetic). Here the kernel meets torchvision directly, on the committed real
photos, with the packed parameters the DALI feed carries: every operation is exact except
the warps with a fractional source position, where torchvision computes its sampling grid
in float32 in another order and a position within rounding error of a pixel boundary
picks the neighbour (measured on these photos: at most 0.002 % of the values).
The pipeline-level parity with DALI's decode is tests/parity/test_op_parity.py; the GPU's graph of
the slots (DALI conditionals), run as its CPU twin, is tests/parity/test_twins.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from conftest import BUNDLED_PHOTOS
from torchvision.io import decode_jpeg, read_file

from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.auto.layout import FIELDS

slot_kernel = pytest.importorskip("dali_pipes.augment.auto.kernel")

WARPS = ("ShearX", "ShearY", "Rotate")  # fractional source positions
SIZE = (160, 192)


def crops() -> list[torch.Tensor]:
    files = sorted(BUNDLED_PHOTOS.rglob("*.jpg"))
    return [F.resize(decode_jpeg(read_file(str(f))), list(SIZE)) for f in files]


def run_kernel(image: torch.Tensor, packed: np.ndarray) -> torch.Tensor:
    hwc = image.permute(1, 2, 0).numpy().astype(np.float32)
    out = np.full_like(hwc, -1.0)
    slot_kernel.run_slot(out, hwc, packed)
    return torch.from_numpy(out).permute(2, 0, 1)


@pytest.fixture(scope="module")
def images() -> list[torch.Tensor]:
    return crops()


@pytest.mark.parametrize(("interpolation", "fill"), [("nearest", 0), ("bilinear", 128)])
@pytest.mark.parametrize("name", auto.OPS)
def test_each_operation_equals_torchvision_on_real_photos(
    images: list[torch.Tensor], name: str, interpolation: str, fill: int
) -> None:
    rng = np.random.default_rng(auto.OP_INDEX[name])
    wrong = total = 0
    for image in images:
        for _ in range(2):
            ops = np.array([auto.OP_INDEX[name]])
            bins, negate = rng.uniform(0, 10, size=1), rng.uniform(size=1) < 0.5
            mags = auto.magnitudes(auto.STANDARD, ops, bins, negate, 11, SIZE)
            p = auto.slot_params("", ops, mags, SIZE, interpolation, fill)
            assert p["packed"].shape == (1, len(FIELDS))
            ours = run_kernel(image, p["packed"][0])
            theirs = auto.apply_torch(image, int(ops[0]), float(mags[0]), interpolation, fill)
            diff = (ours - theirs.float()).abs()
            wrong += int((diff > 0).sum())
            total += diff.numel()
    share = wrong / total
    if name in WARPS:
        assert share <= 2e-4, f"{name}: {100 * share:.4f} % of values differ"
    else:
        assert wrong == 0, f"{name}: {wrong} of {total} values differ"


def test_kernel_results_are_whole_numbers_in_range(images: list[torch.Tensor]) -> None:
    """Every operation writes every value (no -1 left) as a pixel of a uint8 image."""
    ops = np.arange(len(auto.OPS))
    mags = auto.magnitudes(auto.STANDARD, ops, np.full(len(ops), 9.0), ops % 2 == 0, 11, SIZE)
    packed = auto.slot_params("", ops, mags, SIZE, "bilinear", 0)["packed"]
    for row in packed:
        out = run_kernel(images[0], row)
        assert out.min() >= 0 and out.max() <= 255
        assert torch.equal(out, out.floor())


def test_a_wrong_magnitude_in_the_packed_row_is_caught(images: list[torch.Tensor]) -> None:
    """The exactness above can fail: one magnitude step off changes the output."""
    ops = np.array([auto.OP_INDEX["Brightness"]])
    right = auto.magnitudes(auto.STANDARD, ops, np.array([5.0]), np.array([False]), 11, SIZE)
    wrong = auto.slot_params("", ops, right + 0.09, SIZE, "nearest", 0)["packed"][0]
    ours = run_kernel(images[0], wrong)
    theirs = auto.apply_torch(images[0], int(ops[0]), float(right[0]), "nearest", 0)
    assert not torch.equal(ours, theirs.float())
