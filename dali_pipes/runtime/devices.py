"""Placement: where batches are made (``backend.device``) and where the model runs
(``trainer.device``), decided for this process in one place.

The two are independent: DALI on the CPU can feed a model on the GPU (the GPU then spends
nothing on decoding), DALI on the GPU feeds a model on the same GPU. :func:`resolve_devices`
turns the pair into two torch devices, or one line saying why the pair makes no sense;
:func:`dali_pipes.backends.base.loader_devices` answers the same question for a loader
spec (whose ``output_device`` carries ``trainer.device``), and every backend asks it.

=================  =================  =================  =================
trainer \\ backend  gpu                auto               cpu
=================  =================  =================  =================
auto               GPU -> GPU         GPU -> GPU [1]_    CPU -> CPU
cuda               GPU -> GPU         GPU -> GPU         CPU -> GPU
cpu                error              CPU -> CPU         CPU -> CPU
=================  =================  =================  =================

.. [1] CPU -> CPU when no CUDA device is usable. ``trainer.device=auto`` trains where the
   batches are made, so every config written before ``trainer.device`` existed keeps its
   placement; ``trainer.device=cuda`` asks for the hand-over from CPU decoding.

"The GPU" is this process's GPU (:func:`local_gpu`): the local rank's, or the only one
visible when the launcher gives each process its own (``srun --gpus-per-task=1``, a
per-rank ``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from dali_pipes.errors import DeviceError, require
from dali_pipes.runtime.distributed import ranks

log = logging.getLogger(__name__)

BACKEND_DEVICES = ("auto", "gpu", "cpu")
TRAINER_DEVICES = ("auto", "cuda", "cpu")

_logged: set[tuple[str, ...]] = set()  # choices already logged by this process


@dataclass(frozen=True)
class Devices:
    """Where a loader decodes and augments (``made``) and where the model trains and the
    loader hands batches over (``model``)."""

    made: torch.device
    model: torch.device


def check_trainer_device(value: object, key: str = "trainer.device") -> str:
    """``value`` if it is a ``trainer.device`` choice, else a one-line :class:`ConfigError`
    (``gpu`` gets a hint: the trainer names torch devices, the backend names placements)."""
    hint = "; the trainer names torch devices (backend.device says gpu)" if value == "gpu" else ""
    require(value in TRAINER_DEVICES, key, value, f"choose one of {TRAINER_DEVICES}{hint}")
    return str(value)


def _once(key: tuple[str, ...], message: str, *args: object) -> None:
    """Log a placement choice once per process, not once per loader built."""
    if key not in _logged:
        _logged.add(key)
        log.info(message, *args)


def local_gpu() -> torch.device:
    """This process's GPU: ``cuda:<local rank>`` when that many devices are visible, else
    ``cuda:0`` when exactly one is (the launcher gave each process its own GPU, so local
    rank 3 sees its GPU as device 0), else a one-line :class:`DeviceError`."""
    where = ranks()
    local, count = where.local_rank, torch.cuda.device_count()
    if local < count:
        return torch.device("cuda", local)
    if count == 1:
        _once(
            ("one-gpu", str(local)),
            "%s=%d sees one CUDA device: using it (cuda:0), one GPU per process",
            where.local_rank_variable,
            local,
        )
        return torch.device("cuda", 0)
    raise DeviceError(
        f"{where.local_rank_variable}={local} but {count} CUDA devices are visible to this "
        "process; start at most one process per visible GPU, or give each process its own "
        "GPU (srun --gpus-per-task=1 or a per-rank CUDA_VISIBLE_DEVICES)"
    )


def _check_request(
    backend_device: str, trainer_device: str, backend: str, trainer_key: str, available: bool
) -> None:
    """Refuse, in one line naming the keys, a value that is not a choice, a pair that makes
    no sense, or a GPU the machine does not have (``available``: CUDA is usable)."""
    require(
        backend_device in BACKEND_DEVICES,
        "backend.device",
        backend_device,
        f"choose one of {BACKEND_DEVICES}",
    )
    check_trainer_device(trainer_device, trainer_key)
    if backend_device == "gpu" and trainer_device == "cpu":
        raise DeviceError(
            f"backend.device=gpu with {trainer_key}=cpu: batches made on the GPU would be "
            f"copied back to a model on the CPU; use backend.device=cpu (or auto) to train on "
            f"the CPU, or {trainer_key}=cuda"
        )
    if backend_device == "gpu" and not available:
        raise DeviceError(
            f"backend.device=gpu but no CUDA device is visible to {backend or 'the backend'} "
            "(torch.cuda.is_available() is False); use backend.device=cpu or backend.device=auto"
        )
    if trainer_device == "cuda" and not available:
        raise DeviceError(
            f"{trainer_key}=cuda but no CUDA device is visible "
            f"(torch.cuda.is_available() is False); use {trainer_key}=cpu or {trainer_key}=auto"
        )


def resolve_devices(
    backend_device: str,
    trainer_device: str = "auto",
    backend: str = "",
    *,
    gpu: torch.device | None = None,
    trainer_key: str = "trainer.device",
    quiet: bool = False,
) -> Devices:
    """The (made, model) devices of this process for ``backend.device`` and
    ``trainer.device`` (the table in the module docstring).

    ``gpu``: the GPU to use (default :func:`local_gpu`). The choice is logged once per
    process unless ``quiet`` (a what-if question, not the placement in use). Requests the
    machine cannot meet (``gpu``/``cuda`` without a usable CUDA device) and pairs that make
    no sense (batches made on the GPU for a model on the CPU) fail in one line naming both
    keys.
    """
    available = torch.cuda.is_available()
    _check_request(backend_device, trainer_device, backend, trainer_key, available)
    cpu = torch.device("cpu")
    model_on_gpu = trainer_device == "cuda" or (
        trainer_device == "auto" and backend_device != "cpu" and available
    )
    made_on_gpu = model_on_gpu and backend_device != "cpu"
    model = (local_gpu() if gpu is None else gpu) if model_on_gpu else cpu
    devices = Devices(model if made_on_gpu else cpu, model)
    if quiet:
        return devices
    _once(
        (backend, backend_device, trainer_device, str(devices.made), str(devices.model)),
        "placement: backend=%s device=%s makes batches on %s, the model trains on %s (%s=%s)%s",
        backend or "?",
        backend_device,
        devices.made,
        devices.model,
        trainer_key,
        trainer_device,
        "" if available else "; no CUDA device is usable",
    )
    return devices


def output_device_for(backend_device: str, trainer_device: str, backend: str = "") -> str | None:
    """``LoaderSpec.output_device`` for a ``backend.device`` x ``trainer.device`` pair: None
    while ``trainer.device`` leaves the placement as ``backend.device`` alone gives it (so
    ``trainer.device=auto`` never changes a loader), else the model's device, which
    :func:`loader_devices` turns back into the same pair."""
    if trainer_device == "auto":
        return None
    devices = resolve_devices(backend_device, trainer_device, backend)
    alone = resolve_devices(backend_device, "auto", backend, quiet=True)
    return None if devices == alone else str(devices.model)


def resolve_device(requested: str, backend: str) -> torch.device:
    """The device ``backend.device`` alone makes batches on: the local GPU, or the CPU.

    ``auto`` picks the GPU when CUDA is usable; ``gpu`` without a visible CUDA device is
    an error rather than a silent fall-back to the CPU.
    """
    return resolve_devices(requested, "auto", backend, quiet=True).made
