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

import errno
import fcntl
import hashlib
import json
import logging
import mmap
import os
import socket
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Executor, Future, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dali_pipes.errors import ConfigError, DaliPipesError, DataError, DeviceError
from dali_pipes.runtime.distributed import placement

log = logging.getLogger("dali_pipes.data")
T = TypeVar("T")

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
_ALIGN = 64  # bytes: each image starts on a cache line
_POLL = 0.2  # longest sleep between checks while waiting, in seconds
_CHUNK = 256  # most samples per task on the pool
_ERRORS: dict[str, type[DaliPipesError]] = {
    "ConfigError": ConfigError,
    "DataError": DataError,
    "DeviceError": DeviceError,
}

Shape = tuple[int, int, int]
#: shapes of a part's arrays (None: no slot, e.g. an unreadable header)
Measure = Callable[[range], Sequence[Shape | None]]
#: fills the slots of some indices; returns the indices that failed, with a reason
Fill = Callable[[range, Callable[[int], np.ndarray | None]], dict[int, str]]


class PeerFailed(DaliPipesError):
    """Another local rank failed, exited or stalled while the node's copy was built."""


@dataclass(frozen=True)
class NodeGroup:
    """The local ranks that build one shared copy, and where."""

    key: str  # unique to the job, the node, the dataset and split, and the n-th build
    local_rank: int
    local_world_size: int
    directory: Path
    timeout: float  # seconds: longest wait for a peer to join or to show progress


@dataclass(frozen=True)
class SharedArrays:
    """The node's copy as this rank sees it."""

    arrays: list[np.ndarray | None]  # views into the mapped file (None: failed or no slot)
    failures: dict[int, str]  # every index any rank could not fill, with the reason
    filled_here: int  # indices this rank filled (decoded)
    nbytes: int  # size of the shared file


_builds: Counter[str] = Counter()


def node_group(fingerprint: str) -> NodeGroup | None:
    """The group this process shares ``fingerprint``'s copy with, or None when it cannot.

    None for a single local process, and when the environment names no job (no launcher
    variable, no ``DALI_PIPES_JOB_KEY``): ranks could not tell their job's files from
    another's. The n-th build of the same fingerprint in a process gets its own key, so
    building a loader twice never meets the files of the first build.
    """
    where = placement()
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
    return _Build(group, pool, workers).run(count, measure, fits, fill)


# --------------------------------------------------------------------------- the protocol


class _Build:
    def __init__(self, group: NodeGroup, pool: Executor, workers: int) -> None:
        self.group = group
        self.pool = pool
        self.workers = max(1, workers)
        self.directory = group.directory
        self.prefix = f"dali_pipes-{os.getuid()}-{group.key}"
        self.me = _identity(os.getpid())
        self.gen = ""  # set on joining
        self.joined_at = time.monotonic()

    # ------------------------------------------------------------ names

    @property
    def lock_path(self) -> Path:
        """One lock per user and directory, never deleted: deleting a lock file that
        another process may have open is what makes lock files race."""
        return self.directory / f"dali_pipes-{os.getuid()}.lock"

    @property
    def state_path(self) -> Path:
        return self.directory / f"{self.prefix}.state"

    def path(self, what: str) -> Path:
        """A file of this generation: ``data``, ``beat<r>``, ``shapes<r>.npy`` ..."""
        return self.directory / f"{self.prefix}-{self.gen}.{what}"

    # ------------------------------------------------------------ steps

    def run(
        self, count: int, measure: Measure, fits: Callable[[int], None], fill: Fill
    ) -> SharedArrays:
        g = self.group
        self._join()
        try:
            part = range(
                g.local_rank * count // g.local_world_size,
                (g.local_rank + 1) * count // g.local_world_size,
            )
            shapes = [s for chunk in self._on_pool(measure, part) for s in chunk]
            _publish(self.path(f"shapes{g.local_rank}.npy"), _shape_array(shapes, len(part)))
            if g.local_rank == 0:
                self._await("the image sizes", lambda: self._all_exist("shapes{}.npy"))
                layout = _Layout(self._read_shapes())
                self._allocate(layout.nbytes, fits)
            else:
                self._await("the shared file", lambda: self.path("data").exists() or None, [0])
                layout = _Layout(self._read_shapes())
            failures = self._fill(layout, part, fill)
            _publish(self.path(f"done{g.local_rank}.json"), json.dumps(failures).encode())
            self._await("the other parts", lambda: self._all_exist("done{}.json"))
            for q in range(g.local_world_size):
                if q != g.local_rank:
                    theirs = json.loads(self.path(f"done{q}.json").read_text())
                    failures.update({int(i): str(r) for i, r in theirs.items()})
            arrays = layout.views(self._map(layout.nbytes, mmap.ACCESS_COPY), failures)
            return SharedArrays(arrays, failures, len(part), layout.nbytes)
        except BaseException as exc:
            self._publish_failure(exc)
            raise
        finally:
            self._leave()

    def _join(self) -> None:
        """Join the key's live generation, or start one (clearing a dead one's files)."""
        rank = str(self.group.local_rank)
        with self._locked():
            state = _read_json(self.state_path) or {}
            members: dict[str, Any] = dict(state.get("members", {}))
            mine = members.get(rank)
            if mine is not None and _alive(mine):
                raise ConfigError(
                    f"data.cache=ram: pid {mine['pid']} already holds LOCAL_RANK={rank} of "
                    f"this job's shared cache ({self.state_path}); give concurrent jobs "
                    "distinct DALI_PIPES_JOB_KEY values"
                )
            if mine is not None or not any(_alive(m) for m in members.values()):
                _remove(self._files(of_gen=str(state.get("gen", ""))))
                _sweep(self.directory, self.prefix, self.group.timeout)
                state, members = {"gen": uuid.uuid4().hex[:12]}, {}
            members[rank] = self.me
            self.gen = str(state["gen"])
            self.path(f"beat{rank}").touch()
            _publish(self.state_path, json.dumps({"gen": self.gen, "members": members}).encode())
        self.joined_at = time.monotonic()

    def _allocate(self, nbytes: int, fits: Callable[[int], None]) -> None:
        """Local rank 0: refuse a copy the node cannot hold, reserve it, publish it."""
        fits(nbytes)
        stat = os.statvfs(self.directory)
        free = stat.f_bavail * stat.f_frsize
        no_room = ConfigError(
            f"data.cache=ram: the node's shared copy needs {nbytes / 2**30:.2f} GiB in "
            f"{self.directory} but it has {free / 2**30:.2f} GiB free; point "
            "DALI_PIPES_SHM_DIR at a larger tmpfs or local directory (docker: --shm-size), "
            "or use data.cache=null"
        )
        if nbytes > free:
            raise no_room
        temp = self.path(f"data.tmp{os.getpid()}")
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if nbytes:
                # Reserve every page now: a tmpfs that fills up later would kill a rank
                # with SIGBUS in the middle of decoding instead of this one-line error.
                try:
                    os.posix_fallocate(fd, 0, nbytes)
                except (OSError, AttributeError) as exc:  # AttributeError: not on Linux
                    if getattr(exc, "errno", None) == errno.ENOSPC:
                        raise no_room from None
                    os.ftruncate(fd, nbytes)  # a filesystem without fallocate
        except BaseException:
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(temp, self.path("data"))

    def _fill(self, layout: _Layout, part: range, fill: Fill) -> dict[int, str]:
        """Decode this rank's part into the shared file (mapped shared and writable)."""
        mapped = self._map(layout.nbytes, mmap.ACCESS_WRITE) if len(part) else b""
        buffer = np.frombuffer(mapped, dtype=np.uint8)
        failures: dict[int, str] = {}
        for chunk in self._on_pool(lambda c: fill(c, lambda i: layout.slot(buffer, i)), part):
            failures.update(chunk)
        return failures

    def _map(self, nbytes: int, access: int) -> mmap.mmap | bytes:
        if not nbytes:
            return b""
        flags = os.O_RDWR if access == mmap.ACCESS_WRITE else os.O_RDONLY
        fd = os.open(self.path("data"), flags)
        try:
            return mmap.mmap(fd, nbytes, access=access)
        finally:
            os.close(fd)

    def _leave(self) -> None:
        """Mark this rank out; the last one out (the others out or dead) deletes the files."""
        if not self.gen:
            return
        rank = self.group.local_rank
        with suppress(OSError):
            self.path(f"out{rank}").touch()
        members = self._members()
        if members is None:
            return
        if all(self.path(f"out{q}").exists() or not _alive(m) for q, m in members.items()):
            _remove(self._files(of_gen=self.gen))
            with suppress(PeerFailed, OSError), self._locked():
                state = _read_json(self.state_path) or {}
                if state.get("gen") == self.gen:
                    self.state_path.unlink(missing_ok=True)

    # ------------------------------------------------------------ waiting

    def _on_pool(self, fn: Callable[[range], T], part: range) -> list[T]:
        """``fn`` over chunks of ``part`` on the pool, in order. Checks the peers while it
        runs, so a failure elsewhere stops this rank within ``_POLL`` seconds, and beats
        only when a chunk completes: a rank stuck on a read shows no progress, so it and
        its peers fail after the timeout instead of waiting forever."""
        size = max(1, min(_CHUNK, -(-len(part) // (4 * self.workers))))
        futures: list[Future[T]] = [
            self.pool.submit(fn, range(i, min(i + size, part.stop)))
            for i in range(part.start, part.stop, size)
        ]
        try:
            pending = set(futures)
            progress = time.monotonic()
            while pending:
                done, pending = wait(pending, timeout=_POLL, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # raises this rank's own failure
                self._check_error()
                if done:
                    progress = time.monotonic()
                    self._beat()
                elif time.monotonic() - progress > self.group.timeout:
                    raise PeerFailed(
                        f"data.cache=ram: local rank {self.group.local_rank} finished no chunk "
                        f"of its part for {self.group.timeout:g} s (a stuck read?); raise "
                        "DALI_PIPES_CACHE_TIMEOUT if it is only slow"
                    )
        finally:
            for future in futures:
                future.cancel()
        return [future.result() for future in futures]

    def _await(
        self, what: str, ready: Callable[[], T | None], watch: Sequence[int] | None = None
    ) -> T:
        """Wait for ``ready()`` while the ranks in ``watch`` (default: every other) live."""
        ranks = [q for q in range(self.group.local_world_size) if q != self.group.local_rank]
        watch = ranks if watch is None else watch
        delay = 0.005
        while True:
            self._check_error()
            value = ready()
            if value is not None:
                return value
            members = self._members()
            if members is None:
                raise PeerFailed(
                    f"data.cache=ram: {self.state_path} was replaced while this rank waited "
                    f"for {what}: another job on this node has the same job key; give each "
                    "job its own DALI_PIPES_JOB_KEY"
                )
            for q in watch:
                self._check_peer(q, members.get(str(q)), what)
            self._beat()
            time.sleep(delay)
            delay = min(2 * delay, _POLL)

    def _check_peer(self, q: int, member: dict[str, int] | None, what: str) -> None:
        timeout = self.group.timeout
        if member is None:
            if time.monotonic() - self.joined_at > timeout:
                raise PeerFailed(
                    f"data.cache=ram: local rank {q} did not join the node's shared cache "
                    f"within {timeout:g} s (LOCAL_WORLD_SIZE={self.group.local_world_size}); "
                    "every local rank must build this loader, or raise DALI_PIPES_CACHE_TIMEOUT"
                )
            return
        if not _alive(member):
            raise PeerFailed(
                f"data.cache=ram: local rank {q} (pid {member['pid']}) exited while building "
                "the node's shared cache; see that rank's log"
            )
        try:
            idle = time.time() - self.path(f"beat{q}").stat().st_mtime
        except FileNotFoundError:
            return
        if idle > timeout:
            raise PeerFailed(
                f"data.cache=ram: local rank {q} (pid {member['pid']}) made no progress for "
                f"{idle:.0f} s while this rank waited for {what}; raise "
                "DALI_PIPES_CACHE_TIMEOUT if it is only slow"
            )

    def _beat(self) -> None:
        with suppress(OSError):
            os.utime(self.path(f"beat{self.group.local_rank}"))

    def _all_exist(self, pattern: str) -> bool | None:
        done = all(
            self.path(pattern.format(q)).exists() for q in range(self.group.local_world_size)
        )
        return True if done else None

    def _members(self) -> dict[str, dict[str, int]] | None:
        """This generation's members, or None when the key's state is no longer ours."""
        state = _read_json(self.state_path)
        if state is None or state.get("gen") != self.gen:
            return None
        return dict(state.get("members", {}))

    def _read_shapes(self) -> np.ndarray:
        parts = [np.load(self.path(f"shapes{q}.npy")) for q in range(self.group.local_world_size)]
        return np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)

    # ------------------------------------------------------------ failures

    def _check_error(self) -> None:
        record = _read_json(self.path("error.json"))
        if record is None:
            return
        kind = _ERRORS.get(str(record.get("kind")), PeerFailed)
        message = str(record.get("message"))
        if kind is not PeerFailed:
            message += f" (found by local rank {record.get('rank')} for the node's shared cache)"
        raise kind(message)

    def _publish_failure(self, exc: BaseException) -> None:
        """Tell the peers, once (the first failure wins); a peer's own marker is left as is."""
        if not self.gen or self.path("error.json").exists():
            return
        if isinstance(exc, DaliPipesError):
            kind, message = type(exc).__name__, str(exc)
        else:
            first = (str(exc).strip().splitlines() or [""])[0]
            kind = "PeerFailed"
            message = (
                f"data.cache=ram: local rank {self.group.local_rank} failed while building "
                f"the node's shared cache ({type(exc).__name__}: {first}); see that rank's log"
            )
        record = {"rank": self.group.local_rank, "kind": kind, "message": message}
        with suppress(OSError):
            _publish(self.path("error.json"), json.dumps(record).encode(), replace=False)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self.group.timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise PeerFailed(
                            f"data.cache=ram: {self.lock_path} stayed locked for "
                            f"{self.group.timeout:g} s; remove it if no job is running"
                        ) from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _files(self, *, of_gen: str) -> list[Path]:
        if not of_gen:
            return []
        start = f"{self.prefix}-{of_gen}."
        return [self.directory / n for n in _listdir(self.directory) if n.startswith(start)]


class _Layout:
    """Where each array lives in the shared file: computed from every part's shapes, so
    the same on every rank."""

    def __init__(self, shapes: np.ndarray) -> None:
        self.shapes = shapes  # int64 [N, 3]; a row of -1: no slot
        valid = shapes[:, 0] >= 0
        self.sizes = np.where(valid, np.prod(np.maximum(shapes, 0), axis=1), 0)
        padded = -(-self.sizes // _ALIGN) * _ALIGN
        self.offsets = np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(np.int64)
        self.nbytes = int(padded.sum())

    def slot(self, buffer: np.ndarray, index: int) -> np.ndarray | None:
        if self.shapes[index, 0] < 0:
            return None
        start, size = int(self.offsets[index]), int(self.sizes[index])
        return buffer[start : start + size].reshape(tuple(int(s) for s in self.shapes[index]))

    def views(self, mapped: mmap.mmap | bytes, failures: dict[int, str]) -> list[np.ndarray | None]:
        buffer = np.frombuffer(mapped, dtype=np.uint8)
        return [None if i in failures else self.slot(buffer, i) for i in range(len(self.shapes))]


# --------------------------------------------------------------------------- helpers


def _shape_array(shapes: Sequence[Shape | None], n: int) -> np.ndarray:
    out = np.full((n, 3), -1, dtype=np.int64)
    for i, shape in enumerate(shapes):
        if shape is not None:
            out[i] = shape
    return out


def _publish(path: Path, data: bytes | np.ndarray, *, replace: bool = True) -> None:
    """Write ``path`` so that readers see all of it or nothing (and, with ``replace=False``,
    only the first writer's)."""
    temp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(temp, "wb") as f:
        if isinstance(data, np.ndarray):
            np.save(f, data)
        else:
            f.write(data)
    try:
        if replace:
            os.replace(temp, path)
        else:
            with suppress(FileExistsError):
                os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _identity(pid: int) -> dict[str, int]:
    return {"pid": pid, "start": _start_time(pid) or 0}


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart);
    None when it is gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:  # no /proc: at least tell whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    fields = text.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped
        return None
    return int(fields[19])


def _alive(member: dict[str, int]) -> bool:
    start = _start_time(int(member.get("pid", -1)))
    return start is not None and (start == member.get("start") or not member.get("start"))


def _listdir(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def _remove(paths: Sequence[Path]) -> None:
    for path in paths:
        with suppress(OSError):
            path.unlink()


def _sweep(directory: Path, mine: str, grace: float) -> None:
    """Remove what runs that are gone left in ``directory``: every file of a key whose
    state names no live process, and any file of this user older than ``grace`` seconds
    whose key has no state at all (a cleanup cut short). Live keys are never touched."""
    user = f"dali_pipes-{os.getuid()}-"
    names = [n for n in _listdir(directory) if n.startswith(user) and not n.startswith(mine)]
    keys = {n[len(user) :].split(".", 1)[0].split("-", 1)[0] for n in names}
    now = time.time()
    for key in keys:
        prefix = f"{user}{key}"
        state = _read_json(directory / f"{prefix}.state")
        if state is not None and any(_alive(m) for m in state.get("members", {}).values()):
            continue
        files = [directory / n for n in names if n.startswith(prefix)]
        if state is None:
            files = [f for f in files if _older_than(f, now - grace)]
        if files:
            log.info(
                "data.cache=ram: removing %d files of a finished run (%s*)", len(files), prefix
            )
        _remove(files)


def _older_than(path: Path, when: float) -> bool:
    try:
        return path.stat().st_mtime < when
    except OSError:
        return False
