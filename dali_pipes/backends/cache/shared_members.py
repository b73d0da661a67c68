"""The local ranks building one node copy, and how they wait for each other: a
generation of members listed in a state file under a lock, heartbeats, one error marker
that every rank raises, and files named by the generation (see
:mod:`dali_pipes.backends.cache.shared` for the protocol)."""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Executor, Future, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dali_pipes.backends.cache.shared_files import (
    alive,
    identity,
    listdir,
    publish,
    read_json,
    remove,
    sweep,
)
from dali_pipes.errors import ConfigError, DaliPipesError, DataError, DeviceError

T = TypeVar("T")
POLL = 0.2  # longest sleep between checks while waiting, in seconds
CHUNK = 256  # most samples per task on the pool
_ERRORS: dict[str, type[DaliPipesError]] = {
    "ConfigError": ConfigError,
    "DataError": DataError,
    "DeviceError": DeviceError,
}


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


class Generation:
    """This rank's membership in the group's current generation of builders."""

    def __init__(self, group: NodeGroup) -> None:
        self.group = group
        self.directory = group.directory
        self.prefix = f"dali_pipes-{os.getuid()}-{group.key}"
        self.me = identity(os.getpid())
        self.gen = ""  # set on joining
        self.joined_at = time.monotonic()

    @property
    def lock_path(self) -> Path:
        """One lock per user and directory, never deleted: deleting a lock file that
        another process may have open is what makes lock files race."""
        return self.directory / f"dali_pipes-{os.getuid()}.lock"

    @property
    def state_path(self) -> Path:
        """The key's state file: its current generation and members."""
        return self.directory / f"{self.prefix}.state"

    def path(self, what: str) -> Path:
        """A file of this generation: ``data``, ``beat<r>``, ``shapes<r>.npy`` ..."""
        return self.directory / f"{self.prefix}-{self.gen}.{what}"

    def join(self) -> None:
        """Join the key's live generation, or start one (clearing a dead one's files)."""
        rank = str(self.group.local_rank)
        with self.locked():
            state = read_json(self.state_path) or {}
            members: dict[str, Any] = dict(state.get("members", {}))
            mine = members.get(rank)
            if mine is not None and alive(mine):
                raise ConfigError(
                    f"data.cache=ram: pid {mine['pid']} already holds LOCAL_RANK={rank} of "
                    f"this job's shared cache ({self.state_path}); give concurrent jobs "
                    "distinct DALI_PIPES_JOB_KEY values"
                )
            if mine is not None or not any(alive(m) for m in members.values()):
                remove(self.files(of_gen=str(state.get("gen", ""))))
                sweep(self.directory, self.prefix, self.group.timeout)
                state, members = {"gen": uuid.uuid4().hex[:12]}, {}
            members[rank] = self.me
            self.gen = str(state["gen"])
            self.path(f"beat{rank}").touch()
            publish(self.state_path, json.dumps({"gen": self.gen, "members": members}).encode())
        self.joined_at = time.monotonic()

    def leave(self) -> None:
        """Mark this rank out; the last one out (the others out or dead) deletes the files."""
        if not self.gen:
            return
        rank = self.group.local_rank
        with suppress(OSError):
            self.path(f"out{rank}").touch()
        members = self.members()
        if members is None:
            return
        if all(self.path(f"out{q}").exists() or not alive(m) for q, m in members.items()):
            remove(self.files(of_gen=self.gen))
            with suppress(PeerFailed, OSError), self.locked():
                state = read_json(self.state_path) or {}
                if state.get("gen") == self.gen:
                    self.state_path.unlink(missing_ok=True)

    # ------------------------------------------------------------ waiting

    def work(self, fn: Callable[[range], T], part: range, pool: Executor, workers: int) -> list[T]:
        """``fn`` over chunks of ``part`` on the pool, in order. Checks the peers while it
        runs, so a failure elsewhere stops this rank within ``POLL`` seconds, and beats
        only when a chunk completes: a rank stuck on a read shows no progress, so it and
        its peers fail after the timeout instead of waiting forever."""
        size = max(1, min(CHUNK, -(-len(part) // (4 * max(1, workers)))))
        futures: list[Future[T]] = [
            pool.submit(fn, range(i, min(i + size, part.stop)))
            for i in range(part.start, part.stop, size)
        ]
        try:
            pending = set(futures)
            progress = time.monotonic()
            while pending:
                done, pending = wait(pending, timeout=POLL, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # raises this rank's own failure
                self.check_error()
                if done:
                    progress = time.monotonic()
                    self.beat()
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

    def wait(
        self, what: str, ready: Callable[[], T | None], watch: Sequence[int] | None = None
    ) -> T:
        """Wait for ``ready()`` while the ranks in ``watch`` (default: every other) live."""
        ranks = [q for q in range(self.group.local_world_size) if q != self.group.local_rank]
        watch = ranks if watch is None else watch
        delay = 0.005
        while True:
            self.check_error()
            value = ready()
            if value is not None:
                return value
            members = self.members()
            if members is None:
                raise PeerFailed(
                    f"data.cache=ram: {self.state_path} was replaced while this rank waited "
                    f"for {what}: another job on this node has the same job key; give each "
                    "job its own DALI_PIPES_JOB_KEY"
                )
            for q in watch:
                self.check_peer(q, members.get(str(q)), what)
            self.beat()
            time.sleep(delay)
            delay = min(2 * delay, POLL)

    def check_peer(self, q: int, member: dict[str, int] | None, what: str) -> None:
        """Raise :class:`PeerFailed` if local rank ``q`` never joined, exited, or showed no
        progress for the timeout while this rank waited for ``what``."""
        timeout = self.group.timeout
        if member is None:
            if time.monotonic() - self.joined_at > timeout:
                raise PeerFailed(
                    f"data.cache=ram: local rank {q} did not join the node's shared cache "
                    f"within {timeout:g} s (LOCAL_WORLD_SIZE={self.group.local_world_size}); "
                    "every local rank must build this loader, or raise DALI_PIPES_CACHE_TIMEOUT"
                )
            return
        if not alive(member):
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

    def beat(self) -> None:
        """Show progress: touch this rank's heartbeat file."""
        with suppress(OSError):
            os.utime(self.path(f"beat{self.group.local_rank}"))

    def all_exist(self, pattern: str) -> bool | None:
        """True when every rank's file ``pattern`` (``{}``: the rank) exists, else None."""
        done = all(
            self.path(pattern.format(q)).exists() for q in range(self.group.local_world_size)
        )
        return True if done else None

    def members(self) -> dict[str, dict[str, int]] | None:
        """This generation's members, or None when the key's state is no longer ours."""
        state = read_json(self.state_path)
        if state is None or state.get("gen") != self.gen:
            return None
        return dict(state.get("members", {}))

    def read_shapes(self) -> np.ndarray:
        """Every part's published shapes, in sample order."""
        parts = [np.load(self.path(f"shapes{q}.npy")) for q in range(self.group.local_world_size)]
        return np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)

    # ------------------------------------------------------------ failures

    def check_error(self) -> None:
        """Raise the failure a rank published, as the same one-line error."""
        record = read_json(self.path("error.json"))
        if record is None:
            return
        kind = _ERRORS.get(str(record.get("kind")), PeerFailed)
        message = str(record.get("message"))
        if kind is not PeerFailed:
            message += f" (found by local rank {record.get('rank')} for the node's shared cache)"
        raise kind(message)

    def publish_failure(self, exc: BaseException) -> None:
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
            publish(self.path("error.json"), json.dumps(record).encode(), replace=False)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory's lock for the block (waits at most the timeout)."""
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

    def files(self, *, of_gen: str) -> list[Path]:
        """The files of generation ``of_gen`` of this key."""
        if not of_gen:
            return []
        start = f"{self.prefix}-{of_gen}."
        return [self.directory / n for n in listdir(self.directory) if n.startswith(start)]
