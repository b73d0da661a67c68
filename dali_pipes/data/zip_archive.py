"""``data=zip``: an ImageFolder inside a zip archive, read member by member, never extracted.

Many datasets ship as one ``.zip`` of ``<class>/<image>`` folders. This source lists the
archive's central directory once and reads each image's member when a batch asks for it,
so nothing is unpacked to disk. It is an ordinary registered source (one module and one
line in :mod:`dali_pipes.data.registry`): the backends, the sampler, the bad-file policy,
resume, ``scan`` and ``pack`` read it through the source interface alone.

Order and labels are those of ``torchvision.datasets.ImageFolder`` over the extracted
folder: class folders sorted, files sorted by their folder, then by name, extensions
compared without case. A split may be a folder inside the archive (``data.train_dir``,
``data.val_dir``). macOS's ``__MACOSX/`` resource folders are not data and are passed
over. Reads are safe from several threads: each thread keeps a handle of its own, and
every read keeps ``data.read_timeout`` (:func:`~dali_pipes.image.reads.read_all`). A
member that fails its checksum, is encrypted or compressed with a method Python cannot
read is a bad sample under ``data.on_error``, named ``<archive>:<member>``.
"""

from __future__ import annotations

import logging
import os
import posixpath
import threading
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from dali_pipes.data.interface import Indices, SampleStat
from dali_pipes.data.listing import ClassListing
from dali_pipes.data.manifest import read_manifest
from dali_pipes.data.specs import DataSpec
from dali_pipes.data.storage import is_url
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import Blob
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT, read_all

log = logging.getLogger(__name__)

#: Folders archivers add that hold no data (macOS's resource forks).
NOT_DATA = ("__MACOSX",)


@dataclass(frozen=True)
class ZipData(DataSpec):
    """An ImageFolder tree inside a zip archive: ``root`` is the ``.zip`` file.

    With ``train_dir``/``val_dir`` set each split reads that folder of the archive; with them
    unset both splits read the archive's top level.
    """

    name: str = "zip"
    root: str | None = None
    train_dir: str | None = None
    val_dir: str | None = None

    @classmethod
    def from_path(cls, path: str) -> ZipData | None:
        """A ``.zip`` path is this kind of data."""
        return cls(root=path) if path.lower().endswith(".zip") else None


@dataclass(frozen=True, eq=False)
class ZipSource:
    """One split of an ImageFolder inside a zip archive (the
    :class:`~dali_pipes.data.interface.Source` interface, plus ``rejected`` and ``stats``)."""

    archive: str
    members: tuple[str, ...]
    labels: np.ndarray = field(repr=False)
    classes: tuple[str, ...]
    folder: str = ""  # the split's folder inside the archive ("": its top level)
    sizes: tuple[int, ...] = field(default=(), repr=False)  # uncompressed bytes per member
    crcs: tuple[int, ...] = field(default=(), repr=False)
    rejected: tuple[tuple[str, str], ...] = ()
    read_timeout: float | None = DEFAULT_READ_TIMEOUT

    @property
    def root(self) -> str:
        """``<archive>`` or ``<archive>:<folder>``."""
        return f"{self.archive}:{self.folder}" if self.folder else self.archive

    def __len__(self) -> int:
        return len(self.members)

    def read(self, indices: Indices) -> list[Blob]:
        """Each member's bytes, or the error naming it, each read within the deadline."""
        names = [self.name(int(i)) for i in indices]
        return read_all(self._read, names, self.read_timeout)

    def identity(self, indices: Indices) -> np.ndarray:
        """The sample's index: the draws of the extracted folder's ImageFolder order."""
        return np.asarray(indices, dtype=np.int64)

    def name(self, index: int) -> str:
        """``<archive>:<member>``."""
        return f"{self.archive}:{self.members[index]}"

    def stats(self) -> list[SampleStat]:
        """Each member's size and checksum, from the central directory (nothing read)."""
        return [(size, f"crc {crc:08x}") for size, crc in zip(self.sizes, self.crcs, strict=True)]

    def _read(self, name: str) -> Blob:
        member = name[len(self.archive) + 1 :]
        try:
            return np.frombuffer(self._handle().read(member), dtype=np.uint8)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, KeyError) as exc:
            return DataError(f"{name}: unreadable in the archive ({exc}); repack or remove it")

    @cached_property
    def _handles(self) -> threading.local:
        """The open archive of each thread: a ``ZipFile`` seeks one file, so threads (and
        forked processes, which share an inherited file's position) each open their own.
        Not pickled."""
        return threading.local()

    def _handle(self) -> zipfile.ZipFile:
        """This thread's open archive, opened on its first read in this process."""
        local = self._handles
        if getattr(local, "pid", None) != os.getpid():
            local.pid, local.handle = os.getpid(), zipfile.ZipFile(self.archive)
        handle: zipfile.ZipFile = local.handle
        return handle

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def open_zip(data: ZipData, split: str) -> ZipSource:
    """A split of a zip archive: its top level, or its ``train_dir``/``val_dir`` folder."""
    if not data.root:
        raise ConfigError("data.root is not set: pass data.root=/path/to/images.zip")
    if is_url(data.root):
        raise ConfigError(
            f"data.root={data.root}: a zip archive is read from a local disk (its members are "
            "found by seeking); download it first, or pack the data for a bucket"
        )
    archive = str(Path(data.root).expanduser().resolve())
    folder = (data.train_dir if split == "train" else data.val_dir) or ""
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
    except FileNotFoundError:
        raise DataError(f"data root {data.root} does not exist; set data.root to a .zip") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"{data.root}: not a readable zip archive ({exc}); check it") from None
    return _listing(archive, folder.strip("/"), infos, data)


def _listing(archive: str, folder: str, infos: list[zipfile.ZipInfo], data: ZipData) -> ZipSource:
    """The split's samples in ImageFolder order, files it cannot use judged by on_error."""
    prefix = f"{folder}/" if folder else ""
    by_class: dict[str, list[zipfile.ZipInfo]] = {}
    for info in infos:
        name = info.filename
        if info.is_dir() or not name.startswith(prefix):
            continue
        parts = name[len(prefix) :].split("/")
        if len(parts) >= 2 and parts[0] not in NOT_DATA:  # a file beside the classes: ignored
            by_class.setdefault(parts[0], []).append(info)
    where = f"{archive}:{folder}" if folder else archive
    if not by_class:
        raise DataError(
            f"{where} has no class folders; expected <class>/<image>.jpg inside it "
            "(set data.train_dir / data.val_dir to the folder that holds them)"
        )
    excluded = read_manifest(data.exclude) if data.exclude else {}
    listing = ClassListing(data.on_error, excluded)
    classes = sorted(by_class)
    infos_by_name: dict[str, zipfile.ZipInfo] = {}
    for label, cls in enumerate(classes):
        members = sorted(by_class[cls], key=lambda i: posixpath.split(i.filename))
        named = {f"{archive}:{info.filename}": info for info in members}
        infos_by_name.update(named)
        listing.add_class(f"{archive}:{prefix}{cls}", ((n, True) for n in named), label)
    listing.log_ignored(where)
    kept = [infos_by_name[name] for name in listing.files]
    return ZipSource(
        archive=archive,
        members=tuple(info.filename for info in kept),
        labels=np.asarray(listing.labels, dtype=np.int64),
        classes=tuple(classes),
        folder=folder,
        sizes=tuple(info.file_size for info in kept),
        crcs=tuple(info.CRC for info in kept),
        rejected=tuple(listing.rejected),
        read_timeout=data.read_timeout,
    )
