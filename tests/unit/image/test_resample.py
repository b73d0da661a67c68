"""The compiled CPU resize computes DALI's ``fn.resize`` (antialiased linear or cubic, ROI,
clamped edges) to within one grey level.

The DALI CPU loader resizes its crop windows with :mod:`dali_pipes.image.resample` instead of
DALI's CPU ``fn.resize`` (three times faster); the GPU keeps DALI's. Here the kernel meets
DALI's CPU operator directly, on the committed real photos and on generated images chosen
for their edges: fractional ROIs, shrinking and enlarging, one-pixel-high windows, extreme
aspect ratios, one and four channels. Float summation order makes a rare pixel differ by
one; a wrong filter, support, edge rule or ROI mapping differs by many on most pixels.
The loader-level parity (DALI CPU against the torch backend) is tests/parity/test_parity.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from conftest import BUNDLED_PHOTOS
from PIL import Image

from dali_pipes.image.resample import WindowResize

Case = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # image, start, end, size


def _case(image: np.ndarray, start: tuple, end: tuple, size: tuple) -> Case:
    f32 = np.float32
    return image, np.array(start, f32), np.array(end, f32), np.array(size, f32)


def generated_cases() -> list[Case]:
    rng = np.random.default_rng(7)
    cases = []
    for k in range(40):
        h, w = int(rng.integers(1, 600)), int(rng.integers(1, 600))
        h = 1 if k % 10 == 0 else h
        w = 2 if k % 10 == 1 else w
        channels = {3: 1, 7: 4}.get(k % 10, 3)
        image = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        if k % 2:  # smooth ramps as well as noise
            image = np.cumsum(image, axis=1, dtype=np.uint8)
        if k % 3 == 0:
            start, end = (0.0, 0.0), (float(h), float(w))
        else:
            y0, y1 = sorted(rng.uniform(0, h, 2))
            x0, x1 = sorted(rng.uniform(0, w, 2))
            start, end = (y0, x0), (max(y1, y0 + 0.5), max(x1, x0 + 0.5))
        size = (int(rng.integers(1, 300)), int(rng.integers(1, 300)))
        cases.append(_case(image, start, end, size))
    cases.append(_case(cases[0][0][:, :1], (0, 0), (1, 1), (224, 224)))  # 1 x 1 -> 224
    strip = np.random.default_rng(8).integers(0, 256, (3, 2000, 3), dtype=np.uint8)
    cases.append(_case(strip, (0, 0), (3, 2000), (224, 224)))  # extreme aspect ratio
    return cases


def photo_cases() -> list[Case]:
    """Random-resized-crop-like windows of the committed photos, to 224 x 224 and 96 x 128."""
    rng = np.random.default_rng(9)
    cases = []
    for path in sorted(BUNDLED_PHOTOS.rglob("*.jpg")):
        image = np.asarray(Image.open(path).convert("RGB"))
        h, w, _ = image.shape
        ch, cw = int(rng.integers(h // 4, h + 1)), int(rng.integers(w // 4, w + 1))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        window = np.ascontiguousarray(image[y : y + ch, x : x + cw])
        cases.append(_case(window, (0, 0), (ch, cw), (224, 224)))
        cases.append(_case(window, (0.25 * ch, 0.5), (ch - 0.5, 0.75 * cw), (96, 128)))
    return cases


def dali_resize(cases: list[Case], cubic: bool = False) -> list[np.ndarray]:
    """DALI's CPU ``fn.resize`` with the loader's arguments, one sample at a time."""
    from nvidia.dali import fn, pipeline_def, types

    feed: Iterator[Case] = iter(cases)

    def source() -> tuple[list[np.ndarray], ...]:
        return tuple([part] for part in next(feed))

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():  # type: ignore[no-untyped-def]
        image, start, end, size = fn.external_source(source=source, num_outputs=4, batch=True)
        return fn.resize(
            image,
            size=size,
            roi_start=start,
            roi_end=end,
            roi_relative=False,
            antialias=True,
            interp_type=types.INTERP_CUBIC if cubic else types.INTERP_LINEAR,
        )

    built = pipe()
    built.build()
    return [np.asarray(built.run()[0].at(0)) for _ in cases]


def compare(cases: list[Case], cubic: bool = False) -> tuple[int, float]:
    resize = WindowResize(threads=2)
    try:
        kernel = resize.cubic if cubic else resize
        ours = kernel(*(list(part) for part in zip(*cases, strict=True)))
    finally:
        resize.close()
    theirs = dali_resize(cases, cubic)
    worst, differing, total = 0, 0, 0
    for case, a, b in zip(cases, ours, theirs, strict=True):
        assert a.shape == b.shape, f"{case[0].shape} -> {case[3]}: {a.shape} vs DALI {b.shape}"
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
        worst = max(worst, int(diff.max()))
        differing += int((diff > 0).sum())
        total += diff.size
    return worst, differing / total


@pytest.mark.parametrize("cubic", [False, True], ids=["linear", "cubic"])
@pytest.mark.parametrize("cases", [generated_cases, photo_cases], ids=["generated", "photos"])
def test_kernel_computes_dalis_cpu_resize_within_one_grey_level(
    cases: Callable[[], list[Case]], cubic: bool
) -> None:
    worst, differing = compare(cases(), cubic)
    assert worst <= 1, f"a pixel differs from DALI's fn.resize by {worst} grey levels"
    # DALI reads its cubic kernel from a sampled table, the kernel computes it: on the
    # generated noise (every pixel an edge) ~2 % of the values round the other way.
    share = 0.03 if cubic and cases is generated_cases else 0.005
    assert differing < share, f"{differing:.2%} of the values differ from DALI's"


def test_batches_given_after_close_are_still_resized() -> None:
    """DALI may run a batch it already had while the loader closes: it is resized inline,
    identically, instead of failing on the stopped threads."""
    cases = photo_cases()[:4]
    parts = [list(part) for part in zip(*cases, strict=True)]
    resize = WindowResize(threads=2)
    before = resize(*parts)
    resize.close()
    after = resize(*parts)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
