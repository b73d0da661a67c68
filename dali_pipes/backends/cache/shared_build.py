"""Building the node's one copy: measure this rank's part, lay out and reserve the shared
file (local rank 0), decode into it, and map every rank's view (the protocol is
:mod:`dali_pipes.backends.cache.shared`'s)."""

from __future__ import annotations

import errno
import json
import mmap
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from dali_pipes.backends.cache.shared_files import publish
from dali_pipes.backends.cache.shared_members import Generation, NodeGroup
from dali_pipes.errors import ConfigError

Shape = tuple[int, int, int]
#: shapes of a part's arrays (None: no slot, e.g. an unreadable header)
Measure = Callable[[range], Sequence[Shape | None]]
#: fills the slots of some indices; returns the indices that failed, with a reason
Fill = Callable[[range, Callable[[int], np.ndarray | None]], dict[int, str]]
ALIGN = 64  # bytes: each image starts on a cache line


@dataclass(frozen=True)
class SharedArrays:
    """The node's copy as this rank sees it."""

    arrays: list[np.ndarray | None]  # views into the mapped file (None: failed or no slot)
    failures: dict[int, str]  # every index any rank could not fill, with the reason
    filled_here: int  # indices this rank filled (decoded)
    nbytes: int  # size of the shared file


class Build:
    """One rank's part of a build."""

    def __init__(self, group: NodeGroup, pool: Executor, workers: int) -> None:
        self.group = group
        self.pool = pool
        self.workers = max(1, workers)
        self.members = Generation(group)

    def run(
        self, count: int, measure: Measure, fits: Callable[[int], None], fill: Fill
    ) -> SharedArrays:
        """This rank's part of the build, start to end: join the generation, measure, (rank 0)
        allocate, fill, wait for every part, map; any failure is published for the peers."""
        g = self.group
        self.members.join()
        try:
            part = range(
                g.local_rank * count // g.local_world_size,
                (g.local_rank + 1) * count // g.local_world_size,
            )
            shapes = [
                s
                for chunk in self.members.work(measure, part, self.pool, self.workers)
                for s in chunk
            ]
            publish(self.members.path(f"shapes{g.local_rank}.npy"), shape_array(shapes, len(part)))
            if g.local_rank == 0:
                self.members.wait("the image sizes", lambda: self.members.all_exist("shapes{}.npy"))
                layout = Layout(self.members.read_shapes())
                self._allocate(layout.nbytes, fits)
            else:
                self.members.wait(
                    "the shared file", lambda: self.members.path("data").exists() or None, [0]
                )
                layout = Layout(self.members.read_shapes())
            failures = self._fill(layout, part, fill)
            publish(self.members.path(f"done{g.local_rank}.json"), json.dumps(failures).encode())
            self.members.wait("the other parts", lambda: self.members.all_exist("done{}.json"))
            for q in range(g.local_world_size):
                if q != g.local_rank:
                    theirs = json.loads(self.members.path(f"done{q}.json").read_text())
                    failures.update({int(i): str(r) for i, r in theirs.items()})
            arrays = layout.views(self._map(layout.nbytes, mmap.ACCESS_COPY), failures)
            return SharedArrays(arrays, failures, len(part), layout.nbytes)
        except BaseException as exc:
            self.members.publish_failure(exc)
            raise
        finally:
            self.members.leave()

    def _allocate(self, nbytes: int, fits: Callable[[int], None]) -> None:
        """Local rank 0: refuse a copy the node cannot hold, reserve it, publish it."""
        fits(nbytes)
        stat = os.statvfs(self.members.directory)
        free = stat.f_bavail * stat.f_frsize
        no_room = ConfigError(
            f"data.cache=ram: the node's shared copy needs {nbytes / 2**30:.2f} GiB in "
            f"{self.members.directory} but it has {free / 2**30:.2f} GiB free; point "
            "DALI_PIPES_SHM_DIR at a larger tmpfs or local directory (docker: --shm-size), "
            "or use data.cache=null"
        )
        if nbytes > free:
            raise no_room
        temp = self.members.path(f"data.tmp{os.getpid()}")
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
        os.replace(temp, self.members.path("data"))

    def _fill(self, layout: Layout, part: range, fill: Fill) -> dict[int, str]:
        """Decode this rank's part into the shared file (mapped shared and writable)."""
        mapped = self._map(layout.nbytes, mmap.ACCESS_WRITE) if len(part) else b""
        buffer = np.frombuffer(mapped, dtype=np.uint8)
        failures: dict[int, str] = {}
        for chunk in self.members.work(
            lambda c: fill(c, lambda i: layout.slot(buffer, i)), part, self.pool, self.workers
        ):
            failures.update(chunk)
        return failures

    def _map(self, nbytes: int, access: int) -> mmap.mmap | bytes:
        if not nbytes:
            return b""
        flags = os.O_RDWR if access == mmap.ACCESS_WRITE else os.O_RDONLY
        fd = os.open(self.members.path("data"), flags)
        try:
            return mmap.mmap(fd, nbytes, access=access)
        finally:
            os.close(fd)


class Layout:
    """Where each array lives in the shared file: computed from every part's shapes, so
    the same on every rank."""

    def __init__(self, shapes: np.ndarray) -> None:
        self.shapes = shapes  # int64 [N, 3]; a row of -1: no slot
        valid = shapes[:, 0] >= 0
        self.sizes = np.where(valid, np.prod(np.maximum(shapes, 0), axis=1), 0)
        padded = -(-self.sizes // ALIGN) * ALIGN
        self.offsets = np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(np.int64)
        self.nbytes = int(padded.sum())

    def slot(self, buffer: np.ndarray, index: int) -> np.ndarray | None:
        """The array of sample ``index`` inside ``buffer`` (None: it has no slot)."""
        if self.shapes[index, 0] < 0:
            return None
        start, size = int(self.offsets[index]), int(self.sizes[index])
        return buffer[start : start + size].reshape(tuple(int(s) for s in self.shapes[index]))

    def views(self, mapped: mmap.mmap | bytes, failures: dict[int, str]) -> list[np.ndarray | None]:
        """Every sample's array in the mapped file (None where it failed or has no slot)."""
        buffer = np.frombuffer(mapped, dtype=np.uint8)
        return [None if i in failures else self.slot(buffer, i) for i in range(len(self.shapes))]


def shape_array(shapes: Sequence[Shape | None], n: int) -> np.ndarray:
    """``shapes`` as an int64 ``[n, 3]`` array, -1 rows where a sample has no shape."""
    out = np.full((n, 3), -1, dtype=np.int64)
    for i, shape in enumerate(shapes):
        if shape is not None:
            out[i] = shape
    return out
