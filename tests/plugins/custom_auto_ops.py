"""An auto-augment operation defined outside the package, the way a user adds one.

Importing this module registers ``ZoomIn`` (scale about the centre by 1 + magnitude, up to
1.5x): one record, with its range in RandAugment's table, its torchvision call and, for
DALI, its kind (a warp) and ``F.affine``'s arguments. A config names the module in
``augment.imports`` and the operation in ``operations``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torchvision.transforms.v2.functional as F

from dali_pipes.augment.auto.layout import AFFINE
from dali_pipes.augment.auto.operations import Operation, Range, register_operation


def zoom_in(image: torch.Tensor, m: float, mode: Any, fill: Any) -> torch.Tensor:
    return F.affine(
        image,
        angle=0.0,
        translate=[0, 0],
        scale=1.0 + m,
        shear=[0.0, 0.0],
        interpolation=mode,
        fill=fill,
    )


register_operation(
    Operation(
        name="ZoomIn",
        kind=AFFINE,
        torch=zoom_in,
        ranges={"standard": Range(0.0, 0.5)},
        affine=lambda m, size: {"scale": 1.0 + np.asarray(m)},
    )
)
