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
from dali_pipes.backends.base import Batch


def to_torch(outputs: Any, device: torch.device, augment: AugmentSpec, *, dlpack: bool) -> Batch:
    """``(images, labels)`` of DALI's ``outputs`` on ``device`` (``dlpack``: take DALI's
    CPU memory without a copy)."""
    images_dali = outputs[0].as_tensor()
    labels_dali = outputs[1].as_tensor()
    if dlpack:
        images = torch.from_dlpack(images_dali)
        labels = torch.from_dlpack(labels_dali)
    else:
        images, labels = _copied(images_dali, labels_dali, device, augment)
    if augment.dtype == "bfloat16":
        images = images.to(torch.bfloat16)
    if augment.channels_last:
        images = images.permute(0, 3, 1, 2)
    return images, labels


def _copied(
    images_dali: Any, labels_dali: Any, device: torch.device, augment: AugmentSpec
) -> Batch:
    """Copies into new tensors on ``device``, on its current stream (the consumer's)."""
    from nvidia.dali.plugin.pytorch import feed_ndarray

    stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
    dtype = {"float16": torch.float16, "uint8": torch.uint8}.get(augment.dtype, torch.float32)
    images = torch.empty(images_dali.shape(), dtype=dtype, device=device)
    labels = torch.empty(labels_dali.shape(), dtype=torch.int64, device=device)
    feed_ndarray(images_dali, images, cuda_stream=stream)
    feed_ndarray(labels_dali, labels, cuda_stream=stream)
    return images, labels
