"""Turn ``backend.device`` (auto | gpu | cpu) into a torch device for this process."""

from __future__ import annotations

import logging

import torch

from dali_pipes.dist import placement
from dali_pipes.errors import DeviceError

log = logging.getLogger(__name__)


def resolve_device(requested: str, backend: str) -> torch.device:
    """The device batches are produced on: the local rank's GPU, or the CPU.

    ``auto`` picks the GPU when CUDA is usable and logs the choice; ``gpu`` without a
    visible CUDA device is an error rather than a silent fall-back to the CPU.
    """
    if requested == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if requested == "gpu" and not available:
        raise DeviceError(
            f"backend.device=gpu but no CUDA device is visible to {backend} "
            "(torch.cuda.is_available() is False); use backend.device=cpu or backend.device=auto"
        )
    if not available:
        log.info("backend=%s device=auto: no CUDA device, running on the CPU", backend)
        return torch.device("cpu")
    local = placement().local_rank
    count = torch.cuda.device_count()
    if local >= count:
        raise DeviceError(
            f"LOCAL_RANK={local} but only {count} CUDA devices are visible; "
            "start at most one process per GPU"
        )
    if requested == "auto":
        log.info("backend=%s device=auto: using GPU cuda:%d", backend, local)
    return torch.device("cuda", local)
