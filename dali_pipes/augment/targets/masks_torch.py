"""The torch realisation of a geometry row for masks, with torchvision v2's own kernels:
the parity reference the DALI realisation is compared with.

A mask (``[K, H, W]`` instance masks, or ``[1, H, W]`` for a semantic mask) goes through
the same window, resize and crop as its image (:meth:`~dali_pipes.augment.geometry.
Geometry.row`), resampled nearest neighbour as torchvision resizes a ``tv_tensors.Mask``;
pixels the window takes from past the image's edge are ``fill`` (0 for instance masks,
the ignore index for a semantic mask).
"""

from __future__ import annotations

import torch

from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.geometry_torch import pad_far_edges, window_of
from dali_pipes.augment.tv_functional import F

#: What a semantic mask's padding is: torchvision's segmentation reference ignores 255.
IGNORE_INDEX = 255


def mask_row(mask: torch.Tensor, geometry: Geometry, j: int, fill: int = 0) -> torch.Tensor:
    """Sample ``j``'s ``mask`` (uint8 ``[C, H, W]``) through its row of ``geometry``,
    nearest neighbour: uint8 ``[C, *geometry.shape(j)]``."""
    from torchvision import tv_tensors

    window, resize, (top, left) = geometry.row(j)
    (oh, ow) = geometry.shape(j)
    if mask.shape[0] == 0:  # an image with no objects
        return torch.zeros((0, oh, ow), dtype=mask.dtype)
    region = window_of(mask, window, (fill,))
    resized = F.resize(tv_tensors.Mask(region), list(resize)).as_subclass(torch.Tensor)
    return pad_far_edges(resized[:, top : top + oh, left : left + ow], (oh, ow), (fill,))


def mask_flip(mask: torch.Tensor, flip: bool, horizontal: bool = True) -> torch.Tensor:
    """``mask`` mirrored when ``flip``: left-right when ``horizontal``, else top-bottom."""
    if not flip:
        return mask
    return mask.flip(-1) if horizontal else mask.flip(-2)
