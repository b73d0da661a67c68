"""Where a dataset's files are: the local file system or an S3-compatible bucket.

A :class:`~dali_pipes.data.sources.FolderSource` names its files by path or by
``s3://bucket/key`` URL and reads them through the :class:`Storage` its root selects
(:func:`storage_for`), so the loaders never branch on where the data is: a bucket gives
the same files, in the same order, as a local copy, and every read keeps the
``data.read_timeout`` deadline (:mod:`dali_pipes.image.reads`). Packed datasets
(:mod:`dali_pipes.data.shards`) read byte ranges of their shards and ``pack`` writes them
through the same interface, each file whole or not at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from dali_pipes.data.files import remove_stale, write_atomic
from dali_pipes.data.s3 import S3_SCHEME, S3Storage
from dali_pipes.errors import DataError, unreadable
from dali_pipes.image.decode import Blob, read_files
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT

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

    def empty(self, root: str) -> bool:
        """Whether nothing is under ``root`` (one entry is looked at, not all of them)."""
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
        """Positioned reads, each file opened for this call (a file replaced since the
        last call is read afresh; :class:`~dali_pipes.data.shard_reader.ShardReader` keeps
        its own descriptors for the many reads of a training run)."""
        fds: dict[str, int | DataError] = {}
        out: list[bytes | DataError] = []
        try:
            for path, start, length in ranges:
                if path not in fds:
                    try:
                        fds[path] = os.open(path, os.O_RDONLY)
                    except OSError as exc:
                        fds[path] = unreadable(path, exc, "the shard")
                fd = fds[path]
                out.append(fd if isinstance(fd, DataError) else pread(path, fd, start, length))
        finally:
            for fd in fds.values():
                if not isinstance(fd, DataError):
                    os.close(fd)
        return out

    def stat(self, paths: Sequence[str]) -> list[Stat]:
        """``os.stat`` of each path: (size, mtime in ns)."""
        out: list[Stat] = []
        for path in paths:
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                out.append(None)
                continue
            except OSError as exc:
                raise unreadable(path, exc) from None
            out.append((st.st_size, str(st.st_mtime_ns)))
        return out

    def empty(self, root: str) -> bool:
        """Whether the directory ``root`` is missing or empty; a one-line error if it is a file."""
        top = Path(root)
        if top.exists() and not top.is_dir():
            raise DataError(f"{root} is a file; choose a directory")
        if not top.exists():
            return True
        with os.scandir(top) as entries:
            return next(entries, None) is None

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


def pread(path: str, fd: int, start: int, length: int) -> bytes | DataError:
    """``length`` bytes of the open file ``path`` from ``start``, or the error naming it."""
    try:
        blob = os.pread(fd, length, start)
    except OSError as exc:
        return unreadable(path, exc, "the shard")
    return DataError(f"{path}: shard is truncated; re-pack it") if len(blob) != length else blob


def is_url(root: str | os.PathLike[str]) -> bool:
    """Whether ``root`` names object storage (``s3://...``) rather than a local path."""
    return str(root).startswith(S3_SCHEME)


def join(root: str | os.PathLike[str], *parts: str) -> str:
    """``root/part/...`` for a path or a URL (``Path`` would fold ``s3://`` into ``s3:/``)."""
    if is_url(root):
        return "/".join([str(root).rstrip("/"), *(p.strip("/") for p in parts)])
    return str(Path(root).expanduser().joinpath(*parts))


def storage_for(
    root: str | os.PathLike[str], read_timeout: float | None = DEFAULT_READ_TIMEOUT
) -> Storage:
    """The storage a dataset root is on: S3 for ``s3://bucket/prefix``, else local
    (``read_timeout``: ``data.read_timeout``, which an object store's requests fit in)."""
    if is_url(root):
        return S3Storage(read_timeout)
    return LocalStorage()
