"""One decoded copy per node: the local ranks of a job fill and share one file of images.

Why: under torchrun every rank of ``data.cache=ram`` would otherwise decode the whole split
into its own memory, so a node with 8 ranks holds 8 identical copies. Here the local ranks
decode disjoint parts into one pre-sized file in ``/dev/shm`` and each maps all of it.

Coordination uses the filesystem only, because the loader may be built before (or
without) ``init_process_group``. The local ranks of a job find each other by a key unique
to the job, the node, the dataset and split (:func:`node_group`), and then, each step
published by an atomic rename and every wait bounded:

1. **join**: under an ``flock`` (one lock file per user and directory, never deleted) a
   rank joins the key's generation listed in ``<key>.state`` (each member's pid and
   process start time), or starts a new one when no member of it is alive -- what a
   crashed run with the same key left is removed then, and so are the files of any other
   key whose processes are all gone.
2. **measure**: local rank ``r`` of ``L`` reads the image headers of its part (indices
   ``[r*N//L, (r+1)*N//L)``) and publishes their shapes.
3. **allocate**: local rank 0 waits for every part, lays out 64-byte aligned offsets,
   checks the one copy against the node's memory (the caller's ``fits``) and the
   directory's free space, reserves the file (``posix_fallocate``) and publishes it.
4. **fill**: every rank decodes its part into the shared mapping and publishes the indices
   that failed (``on_error=skip``), so every rank can report every bad file.
5. **map**: when every part is in, each rank maps the file copy-on-write (the shared pages
   are never written again; a stray in-place write would only copy that page privately)
   and marks itself out. The last rank out deletes the generation's files: a mapped file
   stays valid after unlink, and its memory is freed when the last rank unmaps it.

A failure in any rank (a bad file under ``on_error=raise``, memory that does not fit, a
crash) is published as an error marker that every waiting rank raises within a fraction of
a second, as the same one-line error. A rank that exits, or whose heartbeat stops for
``DALI_PIPES_CACHE_TIMEOUT`` seconds, or that never joins within that time, fails the
others in one line. Files of a key whose processes are all gone (a run killed with
SIGKILL) are removed by the next run that starts a copy in the same directory (files
without a state file once they are ``DALI_PIPES_CACHE_TIMEOUT`` old), and tmpfs is emptied
at reboot, so stale copies do not accumulate. Only the empty lock file stays.

Environment: ``DALI_PIPES_SHM_DIR`` (where the file lives; default ``/dev/shm``, else the
temp directory), ``DALI_PIPES_JOB_KEY`` (the job's identity, when the launcher sets none of
``TORCHELASTIC_RUN_ID``, ``MASTER_PORT``, ``SLURM_JOB_ID``), ``DALI_PIPES_CACHE_TIMEOUT``
(seconds, default 600).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from dali_pipes.backends.cache.shared_build import Build, Fill, Measure, Shape, SharedArrays
from dali_pipes.backends.cache.shared_members import NodeGroup, PeerFailed
from dali_pipes.errors import ConfigError
from dali_pipes.runtime.distributed import ranks

log = logging.getLogger("dali_pipes.data")

#: What names the job; the first three are per launch, the others narrow it down.
_JOB_VARS = (
    "TORCHELASTIC_RUN_ID",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "MASTER_ADDR",
    "SLURM_STEP_ID",
)
_IDENTITY_VARS = _JOB_VARS[:3]
_DEFAULT_TIMEOUT = 600.0

__all__ = [
    "Fill",
    "Measure",
    "NodeGroup",
    "PeerFailed",
    "Shape",
    "SharedArrays",
    "build_shared",
    "node_group",
]


_builds: Counter[str] = Counter()


def node_group(fingerprint: str) -> NodeGroup | None:
    """The group this process shares ``fingerprint``'s copy with, or None when it cannot.

    None for a single local process, and when the environment names no job (no launcher
    variable, no ``DALI_PIPES_JOB_KEY``): ranks could not tell their job's files from
    another's. The n-th build of the same fingerprint in a process gets its own key, so
    building a loader twice never meets the files of the first build.
    """
    where = ranks()
    if where.local_world_size <= 1:
        return None
    if not 0 <= where.local_rank < where.local_world_size:
        raise ConfigError(
            f"LOCAL_RANK={where.local_rank} is invalid: must be in "
            f"[0, LOCAL_WORLD_SIZE={where.local_world_size})"
        )
    env = os.environ
    job = env.get("DALI_PIPES_JOB_KEY", "")
    if not job:
        if not any(env.get(name) for name in _IDENTITY_VARS):
            log.warning(
                "data.cache=ram: LOCAL_WORLD_SIZE=%d but no job identity in the environment "
                "(%s or DALI_PIPES_JOB_KEY): each local rank decodes its own copy",
                where.local_world_size,
                ", ".join(_IDENTITY_VARS),
            )
            return None
        job = "|".join(f"{name}={env.get(name, '')}" for name in _JOB_VARS)
    _builds[fingerprint] += 1
    identity = "\n".join(
        [
            job,
            socket.gethostname(),
            str(where.world_size),
            str(where.local_world_size),
            fingerprint,
            str(_builds[fingerprint]),
        ]
    )
    key = hashlib.sha256(identity.encode()).hexdigest()[:20]
    return NodeGroup(key, where.local_rank, where.local_world_size, _directory(), _timeout())


def _directory() -> Path:
    """Where the shared file lives: the same on every local rank, whatever the free space
    (a rank deciding on free space could pick another directory than its peers)."""
    chosen = os.environ.get("DALI_PIPES_SHM_DIR", "")
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_dir() or not os.access(path, os.W_OK):
            raise ConfigError(
                f"DALI_PIPES_SHM_DIR={chosen} is not a writable directory; create it or unset it"
            )
        return path
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


def _timeout() -> float:
    text = os.environ.get("DALI_PIPES_CACHE_TIMEOUT", "")
    if not text:
        return _DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(
            f"DALI_PIPES_CACHE_TIMEOUT={text!r} is invalid: must be a number of seconds > 0"
        )
    return value


def build_shared(
    group: NodeGroup,
    count: int,
    *,
    measure: Measure,
    fits: Callable[[int], None],
    fill: Fill,
    pool: Executor,
    workers: int,
) -> SharedArrays:
    """Build (together with the group's other ranks) and map the node's copy of ``count``
    uint8 arrays. ``fits(total_bytes)`` raises to refuse a copy the node cannot hold; it
    and the directory's free-space check run once, on local rank 0, before anything is
    written. Raises the first failure of any rank, as a one-line error."""
    return Build(group, pool, workers).run(count, measure, fits, fill)
