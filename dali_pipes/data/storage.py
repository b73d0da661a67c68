"""Where a dataset's files are: the local file system or an S3-compatible bucket.

An :class:`~dali_pipes.data.sources.ImageSource` names its files by path or by
``s3://bucket/key`` URL and reads them through the :class:`Storage` its root selects
(:func:`storage_for`), so the loaders never branch on where the data is: a bucket gives
the same files, in the same order, as a local copy, and every read keeps the
``data.read_timeout`` deadline (:mod:`dali_pipes.image.reads`). Packed datasets
(:mod:`dali_pipes.data.shards`) read byte ranges of their shards and ``pack`` writes them
through the same interface, each file whole or not at all.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from dali_pipes.data.files import remove_stale, write_atomic
from dali_pipes.data.s3 import S3_SCHEME, S3Storage
from dali_pipes.errors import DataError, unreadable
from dali_pipes.image.decode import Blob, read_files

#: A file's size and what changes when it is rewritten (mtime for a file, ETag for an
#: object); None for a file that does not exist.
Stat = tuple[int, str] | None
#: A byte range of a file: (path, first byte, length).
Range = tuple[str, int, int]


class Storage(Protocol):
    """Reads (and ``pack`` writes) the files of a dataset; picklable, so DataLoader
    workers get their own."""

    @property
    def remote(self) -> bool:
        """Whether each request costs a round trip, so shards are read in cached blocks
        rather than sample by sample (:mod:`~dali_pipes.data.shard_reader`)."""
        ...

    def read_many(self, paths: Sequence[str], timeout: float | None) -> list[Blob]:
        """Each file's bytes, or the :class:`~dali_pipes.errors.DataError` naming it (a
        file that cannot be read, or whose read takes longer than ``timeout`` seconds)."""
        ...

    def read_ranges(self, ranges: Sequence[Range]) -> list[bytes | DataError]:
        """Each range's bytes, or the error naming its file (a short read is an error)."""
        ...

    def stat(self, paths: Sequence[str]) -> list[Stat]:
        """Each file's size and version, None where it does not exist."""
        ...

    def listing(self, root: str) -> list[str]:
        """Every file under ``root``, relative to it (empty where nothing is there)."""
        ...

    def write(
        self, path: str, fill: Callable[[BinaryIO], object], *, needed: int, hint: str
    ) -> None:
        """Write ``path`` whole or not at all from ``fill(f)``; a failure is one line."""
        ...

    def remove_all(self, root: str) -> None:
        """Delete every file under ``root`` (``pack.overwrite``)."""
        ...

    def remove_stale(self, directory: str) -> list[str]:
        """Delete what a killed writer left unfinished in ``directory``; return it."""
        ...


_MAX_OPEN = 64  # shard descriptors a process keeps open (least recently used closed first)


class _Descriptors:
    """Open read-only descriptors of a process, reopened after a fork."""

    def __init__(self) -> None:
        self.pid = -1
        self.fds: OrderedDict[str, int] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, path: str) -> int:
        with self.lock:
            if self.pid != os.getpid():  # forked: the parent's descriptors are not ours
                self.fds, self.pid = OrderedDict(), os.getpid()
            fd = self.fds.get(path)
            if fd is None:
                fd = self.fds[path] = os.open(path, os.O_RDONLY)
                while len(self.fds) > _MAX_OPEN:
                    os.close(self.fds.popitem(last=False)[1])
            self.fds.move_to_end(path)
            return fd


_descriptors = _Descriptors()


@dataclass(frozen=True)
class LocalStorage:
    """Files on a local (or mounted) file system."""

    @property
    def remote(self) -> bool:
        """False: a positioned read costs no more than its bytes; the page cache caches."""
        return False

    def read_many(self, paths: Sequence[str], timeout: float | None) -> list[Blob]:
        """The files' bytes, read in order on one thread with the deadline."""
        return read_files(paths, timeout)

    def read_ranges(self, ranges: Sequence[Range]) -> list[bytes | DataError]:
        """Positioned reads (``os.pread``) from one descriptor per file and process."""
        out: list[bytes | DataError] = []
        for path, start, length in ranges:
            try:
                blob = os.pread(_descriptors.get(path), length, start)
            except OSError as exc:
                out.append(unreadable(path, exc, "the shard"))
                continue
            short = len(blob) != length
            out.append(DataError(f"{path}: shard is truncated; re-pack it") if short else blob)
        return out

    def stat(self, paths: Sequence[str]) -> list[Stat]:
        """``os.stat`` of each path: (size, mtime in ns)."""
        out: list[Stat] = []
        for path in paths:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                out.append(None)
                continue
            except OSError as exc:
                raise unreadable(path, exc) from None
            out.append((st.st_size, str(st.st_mtime_ns)))
        return out

    def listing(self, root: str) -> list[str]:
        """The files under the directory ``root``; a one-line error if it is a file."""
        top = Path(root)
        if top.exists() and not top.is_dir():
            raise DataError(f"{root} is a file; choose a directory")
        return sorted(str(p.relative_to(top)) for p in top.rglob("*") if not p.is_dir())

    def write(
        self, path: str, fill: Callable[[BinaryIO], object], *, needed: int, hint: str
    ) -> None:
        """:func:`~dali_pipes.data.files.write_atomic`: a temporary file renamed into place."""
        write_atomic(Path(path), fill, needed=needed, hint=hint)

    def remove_all(self, root: str) -> None:
        """Delete the files and folders under the directory ``root``."""
        import shutil

        for entry in Path(root).iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()

    def remove_stale(self, directory: str) -> list[str]:
        """The temporary files of writers killed mid-write (:mod:`~dali_pipes.data.files`)."""
        return [str(p) for p in remove_stale(Path(directory))]


def is_url(root: str | os.PathLike[str]) -> bool:
    """Whether ``root`` names object storage (``s3://...``) rather than a local path."""
    return str(root).startswith(S3_SCHEME)


def join(root: str | os.PathLike[str], *parts: str) -> str:
    """``root/part/...`` for a path or a URL (``Path`` would fold ``s3://`` into ``s3:/``)."""
    if is_url(root):
        return "/".join([str(root).rstrip("/"), *(p.strip("/") for p in parts)])
    return str(Path(root).expanduser().joinpath(*parts))


def storage_for(root: str | os.PathLike[str]) -> Storage:
    """The storage a dataset root is on: S3 for ``s3://bucket/prefix``, else local."""
    if is_url(root):
        return S3Storage()
    return LocalStorage()
