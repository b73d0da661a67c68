"""torch.distributed set-up for torchrun: NCCL on GPUs, gloo on CPUs; rank-0 helpers."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as tdist

from dali_pipes.dist import placement
from dali_pipes.errors import ConfigError


def init(device: torch.device) -> None:
    """Join the process group the launcher describes (no-op for a plain single process;
    under torchrun a group is formed even for one process, so DDP/NCCL run as in jobs).

    torchrun sets RANK/WORLD_SIZE/MASTER_*; ``srun`` sets only its own variables, so the
    rank and world size are passed from :func:`~dali_pipes.dist.placement` and the
    rendezvous address must be exported by the job script.
    """
    where = placement()
    if tdist.is_initialized() or (where.world_size <= 1 and "MASTER_ADDR" not in os.environ):
        return
    missing = [key for key in ("MASTER_ADDR", "MASTER_PORT") if key not in os.environ]
    if missing:
        raise ConfigError(
            f"{where.world_size} processes started by {where.launcher} but {' and '.join(missing)} "
            "is not set; export MASTER_ADDR (the first node's host name) and MASTER_PORT "
            "(a free port) in the job script, or start with torchrun"
        )
    if device.type == "cuda":
        torch.cuda.set_device(device)
    tdist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo",
        timeout=timedelta(minutes=30),
        device_id=device if device.type == "cuda" else None,
        rank=where.rank,
        world_size=where.world_size,
    )


def active() -> bool:
    return tdist.is_available() and tdist.is_initialized()


def backend_name() -> str:
    return str(tdist.get_backend()) if active() else "no process group"


def sum_(values: list[float], device: torch.device) -> list[float]:
    """Element-wise sum over ranks (float64 so large counts stay exact)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if active():
        tdist.all_reduce(t)
    return [float(v) for v in t.cpu()]


def max_(value: float, device: torch.device) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    if active():
        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
    return float(t.item())


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj``, on every rank."""
    if not active():
        return [obj]
    out: list[Any] = [None] * tdist.get_world_size()
    tdist.all_gather_object(out, obj)
    return out


def broadcast(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not active():
        return obj
    box = [obj]
    tdist.broadcast_object_list(box, src=0)
    return box[0]


def shutdown() -> None:
    if active():
        tdist.destroy_process_group()
