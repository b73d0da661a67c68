"""Where this process sits in a (possibly multi-node) job.

Sharding uses the *global* rank and world size (DALI's ResNet example uses the local rank,
which silently reads the same shard on every node); the GPU is picked by the *local* rank.
Values come from an initialised ``torch.distributed`` group, else from torchrun's
environment variables, else a single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch.distributed as tdist


@dataclass(frozen=True)
class Placement:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1


def placement() -> Placement:
    env = os.environ
    local_rank = int(env.get("LOCAL_RANK", 0))
    local_world = int(env.get("LOCAL_WORLD_SIZE", 1))
    if tdist.is_available() and tdist.is_initialized():
        return Placement(tdist.get_rank(), tdist.get_world_size(), local_rank, local_world)
    return Placement(
        int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1)), local_rank, local_world
    )


def cpu_share() -> int:
    """CPU cores this process may use: its affinity set divided among local ranks."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // placement().local_world_size)
