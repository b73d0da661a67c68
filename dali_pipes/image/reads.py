"""Reading files with a deadline: a read that never returns becomes a bad file, not a hang.

A FIFO named like an image, a stalled network mount or a dying disk can block ``open`` or
``read`` forever, and a thread blocked in a system call cannot be interrupted. So the reads
of a batch run on a daemon thread of their own while the caller waits with a deadline per
file: a file whose read has not finished ``timeout`` seconds after it started is reported
as a :class:`~dali_pipes.errors.DataError` naming it and the time waited, the blocked thread
is abandoned (a daemon thread never keeps the process from exiting), and the rest of the
batch is read on a fresh thread. At most :data:`MAX_STALLED` threads may be abandoned in a
process; past that the file system is not answering at all and reading stops with one line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from dali_pipes.errors import DataError

T = TypeVar("T")

#: The default deadline of one file read, in seconds (``data.read_timeout``).
DEFAULT_READ_TIMEOUT = 60.0
#: How many blocked reader threads a process may leave behind before it gives up.
MAX_STALLED = 32

_stalled = 0
_stalled_lock = threading.Lock()


class _Job(Generic[T]):
    """Reads ``items`` in order on its own daemon thread, noting when each one started."""

    def __init__(self, read: Callable[[str], T], items: Sequence[str]) -> None:
        self.read, self.items = read, items
        self.results: list[T] = []
        self.started = time.monotonic()  # when the current item's read began
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.abandoned = False
        self.failure: BaseException | None = None
        threading.Thread(target=self._run, name="dali-pipes-read", daemon=True).start()

    def _run(self) -> None:
        try:
            for item in self.items:
                self.started = time.monotonic()
                result = self.read(item)
                with self.lock:
                    if self.abandoned:
                        return
                    self.results.append(result)
        except BaseException as exc:  # handed to the waiting caller
            self.failure = exc
        finally:
            self.done.set()

    def wait(self, timeout: float) -> bool:
        """Wait until every item is read (True) or the current one is ``timeout`` seconds
        old (False)."""
        while not self.done.wait(max(0.0, self.started + timeout - time.monotonic())):
            if time.monotonic() - self.started >= timeout:
                return False
        return True

    def abandon(self) -> list[T]:
        """Stop taking results (the thread may stay blocked): what was read until now."""
        with self.lock:
            self.abandoned = True
            return list(self.results)


def stalled_read(path: str, timeout: float) -> DataError:
    """The error for a read of ``path`` past the deadline (counted: past :data:`MAX_STALLED`
    in a process, raised as the file system not answering)."""
    global _stalled
    with _stalled_lock:
        _stalled += 1
        stalled = _stalled
    if stalled > MAX_STALLED:
        raise DataError(
            f"{path}: {stalled} reads have not returned within data.read_timeout={timeout:g} s; "
            "the file system is not answering: check the mount, then restart"
        )
    return DataError(
        f"{path}: the read did not finish within data.read_timeout={timeout:g} s (a FIFO, a "
        "stalled network mount or a failing disk?); fix or remove the file, or raise the timeout"
    )


def read_all(
    read: Callable[[str], T | DataError], paths: Sequence[str], timeout: float | None
) -> list[T | DataError]:
    """``[read(p) for p in paths]``, each read within ``timeout`` seconds of its start; a read
    past it gives the :class:`DataError` naming the file (None: no deadline, read here)."""
    if timeout is None:
        return [read(p) for p in paths]
    out: list[T | DataError] = []
    while len(out) < len(paths):
        job = _Job(read, paths[len(out) :])
        if job.wait(timeout):
            if job.failure is not None:
                raise job.failure
            out.extend(job.results)
        else:
            out.extend(job.abandon())
            stuck = time.monotonic() - job.started >= timeout  # not a read that just began
            if stuck and len(out) < len(paths):
                out.append(stalled_read(paths[len(out)], timeout))
    return out
