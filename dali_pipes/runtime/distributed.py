"""Everything about a multi-process job: where this process sits, and its process group.

**Where this process sits** (:func:`ranks`, :func:`cpu_share`). Sharding uses the
*global* rank and world size (DALI's ResNet example uses the local rank, which silently
reads the same share on every node); the GPU is picked by the *local* rank. Values come
from an initialised ``torch.distributed`` group, else from torchrun's environment variables
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``), else from Slurm's when
``srun`` started one process per task, else a single process.

Slurm's variables are read only when torchrun's ``RANK``/``WORLD_SIZE`` are absent (torchrun
started under ``srun`` describes its own processes) and only inside an ``srun`` job step
(``SLURM_STEP_ID`` set): a batch script that runs Python directly also sees ``SLURM_NTASKS``
of the whole allocation, and believing it was one of that many processes would wait forever
for the others.

**The process group** (:func:`init` ... :func:`shutdown`): torch.distributed set-up for
torchrun or srun (NCCL on GPUs, gloo on CPUs) and the few collectives the trainer uses
(sums and maxima over ranks, gathering and broadcasting objects). Every helper is a no-op
pass-through for a plain single process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as tdist

from dali_pipes.errors import ConfigError

# --------------------------------------------------------------------------- where it sits

TORCHRUN = "torchrun"
SLURM = "slurm"
SINGLE = "single"


@dataclass(frozen=True)
class Ranks:
    """This process's global and local rank and world size, and who started it."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    #: Who described this process: ``torchrun`` (or torch.distributed), ``slurm`` or
    #: ``single``; error messages name the variables it set.
    launcher: str = SINGLE

    @property
    def local_rank_variable(self) -> str:
        """The environment variable the local rank came from (for error messages)."""
        return "SLURM_LOCALID" if self.launcher == SLURM else "LOCAL_RANK"


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    value = env.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(
            f"environment variable {key}={value!r} is invalid: expected an integer "
            "(set by torchrun or srun; unset it when starting a single process)"
        ) from None


def slurm_tasks_on_node(tasks_per_node: str, node: int) -> int:
    """This node's entry of Slurm's compressed list, e.g. ``"2(x3),1"`` = 2, 2, 2, 1."""
    counts: list[int] = []
    for part in tasks_per_node.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if match is None:
            raise ConfigError(
                f"environment variable SLURM_TASKS_PER_NODE={tasks_per_node!r} is invalid: "
                "expected counts like 4 or 2(x3),1 (as srun sets it)"
            )
        counts += [int(match[1])] * int(match[2] or 1)
    return counts[min(node, len(counts) - 1)]


def _in_srun_step(env: Mapping[str, str]) -> bool:
    torchrun = "RANK" in env or "WORLD_SIZE" in env
    step = "SLURM_STEP_ID" in env or "SLURM_STEPID" in env
    return not torchrun and step and "SLURM_PROCID" in env and "SLURM_NTASKS" in env


def _slurm_local_world(env: Mapping[str, str]) -> int:
    if "SLURM_NTASKS_PER_NODE" in env:
        return _int(env, "SLURM_NTASKS_PER_NODE", 1)
    if "SLURM_TASKS_PER_NODE" in env:
        return slurm_tasks_on_node(env["SLURM_TASKS_PER_NODE"], _int(env, "SLURM_NODEID", 0))
    return 1


def ranks() -> Ranks:
    """This process's ranks, from the initialised group, torchrun, srun, or none (0 of 1).

    torchrun's ``LOCAL_RANK``/``LOCAL_WORLD_SIZE``, when set, win over Slurm's local values.
    """
    env = os.environ
    if _in_srun_step(env):
        launcher = SLURM
        rank, world = _int(env, "SLURM_PROCID", 0), _int(env, "SLURM_NTASKS", 1)
        local_rank = _int(env, "LOCAL_RANK", _int(env, "SLURM_LOCALID", 0))
        local_world = _int(env, "LOCAL_WORLD_SIZE", _slurm_local_world(env))
    else:
        launcher = TORCHRUN if "RANK" in env or "WORLD_SIZE" in env else SINGLE
        rank, world = _int(env, "RANK", 0), _int(env, "WORLD_SIZE", 1)
        local_rank = _int(env, "LOCAL_RANK", 0)
        local_world = _int(env, "LOCAL_WORLD_SIZE", 1)
    if tdist.is_available() and tdist.is_initialized():
        rank, world = tdist.get_rank(), tdist.get_world_size()
        launcher = SLURM if launcher == SLURM else TORCHRUN
    return Ranks(rank, world, local_rank, local_world, launcher)


def cpu_share() -> int:
    """CPU cores this process may use: its affinity set divided among local ranks.

    Under ``srun --cpus-per-task=N`` Slurm has already given each task its share, so that
    is the answer (dividing the node's cores by the tasks again would leave cores idle).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    where = ranks()
    if where.launcher == SLURM and "SLURM_CPUS_PER_TASK" in os.environ:
        return max(1, min(cores, _int(os.environ, "SLURM_CPUS_PER_TASK", cores)))
    return max(1, cores // where.local_world_size)


# --------------------------------------------------------------------------- the process group


def init(device: torch.device) -> None:
    """Join the process group the launcher describes (no-op for a plain single process;
    under torchrun a group is formed even for one process, so DDP/NCCL run as in jobs).

    torchrun sets RANK/WORLD_SIZE/MASTER_*; ``srun`` sets only its own variables, so the
    rank and world size are passed from :func:`ranks` and the
    rendezvous address must be exported by the job script.
    """
    where = ranks()
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
    """Whether a torch.distributed process group is initialised."""
    return tdist.is_available() and tdist.is_initialized()


def backend_name() -> str:
    """The process group's backend (``nccl``, ``gloo``), for the logs."""
    return str(tdist.get_backend()) if active() else "no process group"


def sum_(values: list[float], device: torch.device) -> list[float]:
    """Element-wise sum over ranks (float64 so large counts stay exact)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if active():
        tdist.all_reduce(t)
    return [float(v) for v in t.cpu()]


def max_(value: float, device: torch.device) -> float:
    """The largest ``value`` over ranks."""
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
    """Destroy the process group, if there is one."""
    if active():
        tdist.destroy_process_group()
