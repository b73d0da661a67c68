"""DALI's output batch as torch tensors, as the batch contract wants them.

On the CPU torch takes DALI's memory through DLPack, no copy (what DALI's own iterator
does; a copy is a visible share of a CPU batch's time): DALI's dynamic executor gives each
output batch memory of its own, kept alive by whoever references it. GPU outputs are
copied into torch tensors on the consumer's stream (``feed_ndarray``). bfloat16 (which
DALI has no output type for) is a cast; channels_last is NHWC memory viewed as NCHW.
"""

from __future__ import annotations

from typing import Any

import torch

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.base import Batch, ImageList


def to_torch(
    outputs: Any,
    device: torch.device,
    augment: AugmentSpec,
    *,
    dlpack: bool,
    views: bool = False,
    own_sizes: bool = False,
) -> Batch:
    """``(images, labels)`` of DALI's ``outputs`` (the views, then the labels) on ``device``
    (``dlpack``: take DALI's CPU memory without a copy); ``views``: the images as a list,
    one tensor per view; ``own_sizes``: each image a size of its own, an
    :class:`~dali_pipes.backends.base.ImageList` of ``[3, H, W]`` tensors."""
    labels = _tensor(outputs[-1].as_tensor(), device, torch.int64, dlpack)
    dtype = {"float16": torch.float16, "uint8": torch.uint8}.get(augment.dtype, torch.float32)
    if own_sizes:  # channels_last is refused for such a split (AugmentSpec)
        images = each_sample(outputs[0], device, dtype, dlpack)
        if augment.dtype == "bfloat16":
            images = [image.to(torch.bfloat16) for image in images]
        return ImageList(images), labels
    images = []
    for output in outputs[:-1]:
        view = _tensor(output.as_tensor(), device, dtype, dlpack)
        if augment.dtype == "bfloat16":
            view = view.to(torch.bfloat16)
        if augment.channels_last:
            view = view.permute(0, 3, 1, 2)
        images.append(view)
    return (images if views else images[0]), labels


def each_sample(
    output: Any, device: torch.device, dtype: torch.dtype, dlpack: bool
) -> list[torch.Tensor]:
    """One output whose samples have shapes of their own, as one tensor per sample."""
    return [_tensor(output[j], device, dtype, dlpack) for j in range(len(output))]


def masks_tensor(output: Any, device: torch.device, dlpack: bool) -> torch.Tensor:
    """The instance masks' output, uint8 ``[N, H, W, K]``, on ``device``."""
    return _tensor(output.as_tensor(), device, torch.uint8, dlpack)


def _tensor(batch: Any, device: torch.device, dtype: torch.dtype, dlpack: bool) -> torch.Tensor:
    """One output as a torch tensor: DALI's memory (DLPack) or a copy into a new tensor on
    ``device``, on its current stream (the consumer's)."""
    if dlpack:
        return torch.from_dlpack(batch)
    from nvidia.dali.plugin.pytorch import feed_ndarray

    stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
    tensor = torch.empty(batch.shape(), dtype=dtype, device=device)
    feed_ndarray(batch, tensor, cuda_stream=stream)
    return tensor
