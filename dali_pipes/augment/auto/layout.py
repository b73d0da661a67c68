"""What the DALI realisations of an auto-augment slot read: its branch kinds and the packed
row of parameters the CPU's compiled kernel takes.

Shared by :mod:`~dali_pipes.augment.auto.slots` (which draws and packs the parameters) and
:mod:`~dali_pipes.augment.auto.kernel` (which imports numba: only CPU pipelines import it).
"""

from __future__ import annotations

import numpy as np

#: DALI branches: the five geometric operations are one warp with a per-sample matrix.
KINDS = (
    "identity",
    "affine",
    "brightness",
    "color",
    "contrast",
    "sharpness",
    "posterize",
    "solarize",
    "autocontrast",
    "equalize",
    "invert",
)
(
    IDENTITY,
    AFFINE,
    BRIGHTNESS,
    COLOR,
    CONTRAST,
    SHARPNESS,
    POSTERIZE,
    SOLARIZE,
    AUTOCONTRAST,
    EQUALIZE,
    INVERT,
) = range(len(KINDS))

#: The packed row of one slot (float64 per sample), in order: the kind, the warp matrix
#: (2x3, output pixel corners -> input), the enhance factor and ``1 - factor``, posterize's
#: step, solarize's threshold, then the op's interpolation (1: bilinear) and fill.
FIELDS: tuple[str, ...] = ("kind", "m00", "m01", "m02", "m10", "m11", "m12")
FIELDS += ("factor", "inv", "step", "threshold", "bilinear", "fill")


def pack(
    kind: np.ndarray,
    matrix: np.ndarray,
    factor: np.ndarray,
    inv: np.ndarray,
    step: np.ndarray,
    threshold: np.ndarray,
    bilinear: bool,
    fill: int,
) -> np.ndarray:
    """The slot's parameters as ``[B, len(FIELDS)]`` float64 rows."""
    n = len(kind)
    out = np.empty((n, len(FIELDS)), dtype=np.float64)
    out[:, 0] = kind
    out[:, 1:7] = matrix.reshape(n, 6)
    out[:, 7], out[:, 8], out[:, 9], out[:, 10] = factor, inv, step, threshold
    out[:, 11], out[:, 12] = float(bilinear), float(fill)
    return out
