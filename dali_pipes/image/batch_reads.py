"""Reading a batch of local files without the GIL, each read within the deadline.

Reading files on Python threads costs the feed of the GPU path its speed: every file's
``open``, ``read`` and ``close`` takes and gives back the GIL, which the thread that runs
DALI's ``external_source`` callback and the training loop wait for in turn. Here a batch's
files are read by one compiled loop (numba, ``nogil``) calling the C library's ``open``,
``lseek``, ``read`` and ``close`` itself, into one buffer for the batch: Python runs once
per batch, not once per file.

The deadline is kept as :mod:`dali_pipes.image.reads` keeps it for Python reads: the loop
runs on a daemon thread of its own and says which file it is reading; a file still being
read ``timeout`` seconds after it was first seen there (a FIFO, a stalled network mount)
is a :class:`~dali_pipes.errors.DataError` naming it, the thread is abandoned (told to stop
once its read returns, never waited for) and the rest of the batch is read on a fresh one.
A file the loop cannot open or read is read again by :func:`~dali_pipes.image.decode.
read_files`, so its error is the one every other reader gives, word for word.

:class:`LocalReads` keeps the buffers of batches whose bytes are no longer needed and reads
later batches into them: a fresh buffer's pages cost the kernel more to provide than the
files cost to read.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from dali_pipes.image.compiled import caching_jit
from dali_pipes.image.decode import Blob, read_files
from dali_pipes.image.reads import stalled_read

_jit = caching_jit()
_PENDING, _OK, _FAILED = 0, 1, 2
_SEEK_SET, _SEEK_END = 0, 2
#: A size past which ``lseek`` is not a regular file's size (a directory's can be 2**63 - 1):
#: such a path is read again the ordinary way, for its error.
_MAX_SIZE = 1 << 36
#: Bytes per file a batch's first buffer is sized for before any file was read.
_FIRST_GUESS = 128 * 1024


def _libc(builder: Any, name: str, ret: ir.Type, args: list[ir.Type]) -> Any:
    """The C library's function ``name``, resolved by the linker (so the compiled loop can
    be cached on disk: no address is baked into it)."""
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


def _as(context: Any, builder: Any, sig: Any, args: Any, *kinds: Any) -> list[Any]:
    """The arguments cast to the C function's types (literals arrive as int64)."""
    return [
        context.cast(builder, value, given, kind)
        for value, given, kind in zip(args, sig.args, kinds, strict=True)
    ]


def _at(context: Any, builder: Any, kind: Any, array: Any, offset: Any) -> Any:
    """A pointer to byte ``offset`` of a uint8 ``array``."""
    return builder.gep(context.make_array(kind)(context, builder, array).data, [offset])


def _c_open(typingctx: Any, names: Any, start: Any) -> Any:
    """``open(names + start, O_RDONLY)``: the path is NUL-terminated in ``names``."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        fn = _libc(builder, "open", i32, [ir.IntType(8).as_pointer(), i32])
        return builder.call(fn, [_at(context, builder, sig.args[0], *args), ir.Constant(i32, 0)])

    return types.int32(names, start), codegen


def _c_lseek(typingctx: Any, fd: Any, offset: Any, whence: Any) -> Any:
    """``lseek(fd, offset, whence)``."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        i32, i64 = ir.IntType(32), ir.IntType(64)
        c_args = _as(context, builder, sig, args, types.int32, types.int64, types.int32)
        return builder.call(_libc(builder, "lseek", i64, [i32, i64, i32]), c_args)

    return types.int64(fd, offset, whence), codegen


def _c_read(typingctx: Any, fd: Any, buf: Any, offset: Any, count: Any) -> Any:
    """``read(fd, buf + offset, count)``."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        i32, i64 = ir.IntType(32), ir.IntType(64)
        fn = _libc(builder, "read", i64, [i32, ir.IntType(8).as_pointer(), i64])
        at = _at(context, builder, sig.args[1], args[1], args[2])
        fd = context.cast(builder, args[0], sig.args[0], types.int32)
        count = context.cast(builder, args[3], sig.args[3], types.int64)
        return builder.call(fn, [fd, at, count])

    return types.int64(fd, buf, offset, count), codegen


def _c_close(typingctx: Any, fd: Any) -> Any:
    """``close(fd)``."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        fd = _as(context, builder, sig, args, types.int32)
        return builder.call(_libc(builder, "close", i32, [i32]), fd)

    return types.int32(fd), codegen


# The compiled loop calls these (mypy sees numba's intrinsic wrapper, not the signature).
_open: Any = intrinsic(_c_open)
_lseek: Any = intrinsic(_c_lseek)
_read: Any = intrinsic(_c_read)
_close: Any = intrinsic(_c_close)


@_jit
def _read_files(
    names: np.ndarray,
    starts: np.ndarray,
    first: int,
    buf: np.ndarray,
    pos: int,
    buf_id: int,
    state: np.ndarray,
    progress: np.ndarray,
    stop: np.ndarray,
) -> tuple[int, int]:
    """Read files ``first``, ... (their NUL-terminated paths at ``starts`` in ``names``) into
    ``buf`` from byte ``pos``; returns (the next file, the next free byte).

    ``state[k]``: (status, buffer id, first byte, length). ``progress[0]`` is the file being
    read, ``progress[1]`` the size of a file ``buf`` has no room for (the loop then
    returns it as the next file). ``stop[0]`` set: return before the next file."""
    for k in range(first, len(starts)):
        if stop[0]:
            return k, pos
        progress[0] = k
        fd = _open(names, starts[k])
        if fd < 0:
            state[k, 0] = _FAILED
            continue
        size = _lseek(fd, 0, _SEEK_END)
        if size < 0 or size > _MAX_SIZE or _lseek(fd, 0, _SEEK_SET) != 0:
            _close(fd)
            state[k, 0] = _FAILED
            continue
        if pos + size > len(buf):
            _close(fd)
            progress[1] = size
            return k, pos
        got = n = 0
        while got < size:
            n = _read(fd, buf, pos + got, size - got)
            if n <= 0:
                break
            got += n
        _close(fd)
        if got < size and n < 0:
            state[k, 0] = _FAILED
            continue
        state[k, 1] = buf_id
        state[k, 2] = pos
        state[k, 3] = got
        state[k, 0] = _OK
        pos += got
    return len(starts), pos


def encode(paths: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``paths`` as the loop reads them: NUL-terminated file system bytes in one array, and
    where each one starts."""
    names = np.frombuffer(os.fsencode("\0".join(paths) + "\0"), dtype=np.uint8)
    ends = np.flatnonzero(names == 0)
    return names, np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)


@dataclass
class _Job:
    """Files ``first``, ... of a batch read by the compiled loop on a daemon thread of their
    own, into buffers taken from ``take``."""

    names: np.ndarray
    starts: np.ndarray
    first: int
    take: Any  # (bytes needed) -> a uint8 buffer at least that long
    guess: int  # bytes to ask for first
    state: np.ndarray = field(init=False)
    buffers: list[np.ndarray] = field(default_factory=list)
    progress: np.ndarray = field(default_factory=lambda: np.zeros(2, np.int64))
    stop: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    done: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None

    def __post_init__(self) -> None:
        self.state = np.zeros((len(self.starts), 4), np.int64)
        self.progress[0] = self.first

    def run(self) -> None:
        """Read every file (grow into a further buffer when one is full)."""
        try:
            k, need = self.first, self.guess
            while k < len(self.starts) and not self.stop[0]:
                buf = self.take(need)
                self.buffers.append(buf)
                args = (self.names, self.starts, k, buf, 0, len(self.buffers) - 1)
                k, _ = _read_files(*args, self.state, self.progress, self.stop)
                need = max(int(self.progress[1]), len(buf))
        except BaseException as exc:  # handed to the waiting caller
            self.failure = exc
        finally:
            self.done.set()

    def wait(self, timeout: float) -> int | None:
        """Wait until every file is read (None) or one has been read for ``timeout``
        seconds since it was first seen being read: its index."""
        poll = min(0.05, timeout / 10)
        seen, since = -1, time.monotonic()
        while not self.done.wait(poll):
            k = int(self.progress[0])
            if k != seen:
                seen, since = k, time.monotonic()
            elif time.monotonic() - since >= timeout:
                self.stop[0] = 1  # the loop returns once this read does: never waited for
                return k
        if self.failure is not None:
            raise self.failure
        return None


@dataclass
class LocalBatch:
    """A batch's bytes: each file's (a view of the batch's buffers) or the error naming it."""

    blobs: list[Blob]
    buffers: list[np.ndarray]


class LocalReads:
    """Reads batches of local files (:meth:`read`), reusing the buffers :meth:`recycle` is
    given back; safe to call from several threads."""

    def __init__(self, timeout: float | None, keep: int = 16) -> None:
        self.timeout = timeout
        self.keep = keep
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()
        self._per_file = float(_FIRST_GUESS)  # bytes per file seen lately

    def _take(self, size: int) -> np.ndarray:
        """A buffer of at least ``size`` bytes: a recycled one, or a new one of the next
        power of two (so that later batches of about the same size find it again)."""
        with self._lock:
            for k in range(len(self._free) - 1, -1, -1):  # the smallest that fits
                if len(self._free[k]) >= size:
                    return self._free.pop(k)
        return np.empty(1 << max(20, (size - 1).bit_length()), np.uint8)

    def recycle(self, batch: LocalBatch) -> None:
        """``batch``'s bytes are no longer read by anyone: its buffers may be read into
        again (its views then change)."""
        with self._lock:
            self._free.extend(batch.buffers)
            self._free.sort(key=len, reverse=True)
            del self._free[self.keep :]
        batch.buffers = []

    def read(self, paths: Sequence[str]) -> LocalBatch:
        """Each file's bytes, or the :class:`DataError` naming it: a file that cannot be
        read, or whose read takes longer than the deadline."""
        if not paths:
            return LocalBatch([], [])
        names, starts = encode(paths)
        out: list[Blob | None] = [None] * len(paths)
        buffers: list[np.ndarray] = []
        first = 0
        while first < len(paths):
            guess = int(1.5 * self._per_file * (len(paths) - first)) + (1 << 20)
            job = _Job(names, starts, first, self._take, guess)
            stalled = self._run(job)
            if stalled is None:  # an abandoned loop may still write into its buffers
                buffers += job.buffers
            for k in range(first, len(paths) if stalled is None else stalled):
                status, buf, start, length = job.state[k].tolist()
                if status == _OK:
                    out[k] = job.buffers[buf][start : start + length]
            if stalled is None:
                break
            assert self.timeout is not None
            out[stalled] = stalled_read(paths[stalled], self.timeout)
            first = stalled + 1
        again = [k for k, blob in enumerate(out) if blob is None]  # the loop could not read
        for k, blob in zip(again, read_files([paths[k] for k in again], self.timeout), strict=True):
            out[k] = blob
        if first == 0 and not again:  # what the next batch's first buffer is sized for
            self._per_file = 0.8 * self._per_file + 0.2 * float(job.state[:, 3].mean())
        return LocalBatch([blob for blob in out if blob is not None], buffers)

    def _run(self, job: _Job) -> int | None:
        """Run ``job`` (on a thread of its own when there is a deadline); the file that
        stalled, if one did."""
        if self.timeout is None:
            job.run()
            if job.failure is not None:
                raise job.failure
            return None
        threading.Thread(target=job.run, name="dali-pipes-read", daemon=True).start()
        return job.wait(self.timeout)
