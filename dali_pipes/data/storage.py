"""Where a dataset's files are: the local file system or an S3-compatible bucket.

An :class:`~dali_pipes.data.sources.ImageSource` names its files by path or by
``s3://bucket/key`` URL and reads them through the :class:`Storage` its root selects
(:func:`storage_for`), so the loaders never branch on where the data is: a bucket gives
the same files, in the same order, as a local copy, and every read keeps the
``data.read_timeout`` deadline (:mod:`dali_pipes.image.reads`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dali_pipes.data.s3 import S3_SCHEME, S3Storage
from dali_pipes.image.decode import Blob, read_files


class Storage(Protocol):
    """Reads the files of a dataset; picklable, so DataLoader workers get their own."""

    def read_many(self, paths: Sequence[str], timeout: float | None) -> list[Blob]:
        """Each file's bytes, or the :class:`~dali_pipes.errors.DataError` naming it (a
        file that cannot be read, or whose read takes longer than ``timeout`` seconds)."""
        ...


@dataclass(frozen=True)
class LocalStorage:
    """Files on a local (or mounted) file system."""

    def read_many(self, paths: Sequence[str], timeout: float | None) -> list[Blob]:
        """The files' bytes, read in order on one thread with the deadline."""
        return read_files(paths, timeout)


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
