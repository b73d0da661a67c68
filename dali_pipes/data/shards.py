"""Packed datasets: WebDataset-style tar shards, their indices, and reading them back.

Layout written by ``python -m dali_pipes.pack`` (:mod:`dali_pipes.tools.pack`)::

    OUT/dataset.json                 written last: its presence means the pack is complete
    OUT/<part>/shard-000000.tar      samples "<key>.jpg|png|webp" + "<key>.cls" (class index)
    OUT/<part>/shard-000000.idx      DALI's webdataset index (``wds2idx`` format v1.2)
    OUT/<part>/shard-000000.json     labels and source paths; written after .tar and .idx,
                                     so it marks the shard complete (what resuming checks)

``<part>`` is ``train`` and ``val`` when the splits are different folders, else ``all``
(both splits read it). Tar members are written with fixed metadata (mtime 0, uid 0), so
packing the same files with the same settings gives byte-identical shards.

A sample's key is its identity: the index of its file in the folder's ``ImageFolder``
order (``s000000042`` = file 42; :func:`sample_key`, :func:`key_identity`). Augmentation
is drawn from the identity (:meth:`dali_pipes.data.sources.ImageSource.identity`), so a photo
gets the same crop and flip from its shard as from the folder, wherever packing put it.

Reading needs no tar parsing: each sample's offset and size come from the index, and
:class:`ShardReader` fetches a batch with positioned reads (``os.pread``), merging
neighbouring samples into one read, from one open descriptor per shard and process.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from dali_pipes.data.files import write_atomic, write_text
from dali_pipes.errors import DataError, unreadable

FORMAT = "dali_pipes.shards/1"  # written into every pack: never renamed with the module
MANIFEST = "dataset.json"
IMAGE_EXTS = ("jpg", "png", "webp")
INDEX_VERSION = "v1.2"
#: What to do when a shard cannot be written.
WRITE_HINT = "free space or choose another out=; rerunning the same command resumes the pack"
_MERGE_GAP = 64 * 1024  # read neighbouring samples in one call when at most this far apart
_KEY = re.compile(r"s(\d{9,})\.[a-z]+")  # sample_key(i) + "." + its extension


def shard_name(number: int) -> str:
    """A shard's file stem: ``shard-000042``."""
    return f"shard-{number:06d}"


def sample_key(identity: int) -> str:
    """A packed sample's key: its file's index in the folder (``42`` -> ``s000000042``)."""
    return f"s{identity:09d}"


def key_identity(member: str, tar: str = "") -> int:
    """The identity a member name carries (``s000000042.jpg`` -> 42): :func:`sample_key`
    read back; a one-line :class:`DataError` naming the shard ``tar`` for a name ``pack``
    did not write."""
    match = _KEY.fullmatch(member)
    if match is None:
        raise DataError(
            f"{tar or member}: member {member!r} is not a sample key pack writes; "
            "re-pack with python -m dali_pipes.pack"
        )
    return int(match[1])


def image_ext(path: str) -> str:
    """The member extension for a source image file (``.jpeg`` is stored as ``jpg``)."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    return "jpg" if ext in ("jpg", "jpeg") else ext


def _member(tar: tarfile.TarFile, name: str, data: bytes) -> int:
    """Append one member with fixed metadata; return the offset of its data."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    start = tar.offset
    tar.addfile(info, io.BytesIO(data))
    return start + tarfile.BLOCKSIZE  # ustar, short name: one header block


@dataclass(frozen=True)
class ShardSample:
    """One sample as a shard stores it: its key, extension, bytes, label and source file."""

    key: str
    ext: str
    data: bytes
    label: int
    source: str


def write_shard(directory: Path, number: int, samples: Sequence[ShardSample]) -> int:
    """Write one shard (tar, DALI index, sidecar), each file atomically; return tar bytes.

    The sidecar goes last and records the tar's size and SHA-256: a shard whose sidecar
    exists and matches its tar is complete (:func:`shard_complete`). A failed write (a full
    disk, a read-only folder) leaves no partial file behind and is one line.
    """
    name = shard_name(number)
    tar_path, idx_path, meta_path = (directory / f"{name}{s}" for s in (".tar", ".idx", ".json"))
    lines: list[str] = []
    digest = hashlib.sha256()
    written = 0

    def fill(raw: BinaryIO) -> None:
        nonlocal written
        hashed = _Hashing(raw, digest)
        stream = cast(BinaryIO, hashed)
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for s in samples:
                image_at = _member(tar, f"{s.key}.{s.ext}", s.data)
                cls = str(s.label).encode()
                cls_at = _member(tar, f"{s.key}.cls", cls)
                lines.append(
                    f"{s.ext} {image_at} {len(s.data)} {s.key}.{s.ext} "
                    f"cls {cls_at} {len(cls)} {s.key}.cls"
                )
        written = hashed.size

    needed = sum(len(s.data) + 2048 for s in samples) + 10240
    write_atomic(tar_path, fill, needed=needed, hint=WRITE_HINT)
    write_text(
        idx_path, f"{INDEX_VERSION} {len(samples)}\n" + "\n".join(lines) + "\n", hint=WRITE_HINT
    )
    meta = {
        "samples": len(samples),
        "bytes": written,
        "sha256": digest.hexdigest(),
        "labels": [s.label for s in samples],
        "sources": [s.source for s in samples],
    }
    write_text(meta_path, json.dumps(meta), hint=WRITE_HINT)
    return written


class _Hashing:
    """A write-only file object that hashes and counts what goes through it."""

    def __init__(self, raw: BinaryIO, digest: Any) -> None:
        self.raw, self.digest, self.size = raw, digest, 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def tell(self) -> int:
        return self.size


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON atomically."""
    write_text(path, json.dumps(obj, indent=1), hint=WRITE_HINT)


def shard_complete(directory: Path, number: int, *, verify: bool = False) -> bool:
    """True when the shard's sidecar exists and its tar has the size the sidecar records;
    with ``verify`` (``pack`` before keeping a shard), also its SHA-256: a shard corrupted
    in place keeps its size, not its checksum. Readers check the size only: hashing every
    shard would read the whole dataset before the first batch."""
    name = shard_name(number)
    meta_path, tar_path = directory / f"{name}.json", directory / f"{name}.tar"
    if not (meta_path.exists() and tar_path.exists() and (directory / f"{name}.idx").exists()):
        return False
    try:
        meta = json.loads(meta_path.read_text())
        if tar_path.stat().st_size != meta.get("bytes"):
            return False
        expected = meta.get("sha256")
        return not verify or expected is None or _sha256(tar_path) == expected
    except (OSError, ValueError):
        return False


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- reading


def index_path(tar: str | os.PathLike[str]) -> Path:
    """The DALI webdataset index that goes with a shard: ``shard-N.tar`` -> ``shard-N.idx``."""
    return Path(tar).with_suffix(".idx")


def require_index(tar: str | os.PathLike[str]) -> Path:
    """The shard's index path, or a one-line error naming it and the commands that make it.

    DALI's webdataset reader cannot read a shard without its index, and its own error for
    that is a multi-line C++ message; the index is what ``pack`` writes (or DALI's
    ``wds2idx`` tool, which writes the same file from the tar alone).
    """
    idx = index_path(tar)
    if not idx.is_file():
        out = Path(tar).parent.parent
        raise DataError(
            f"{idx}: shard index missing (DALI's webdataset reader cannot read "
            f"{Path(tar).name} without it); write it with: wds2idx {tar} {idx} -- or rerun "
            f"the python -m dali_pipes.pack command that wrote {out}"
        )
    return idx


def read_index(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Image offsets, sizes and member names from a DALI webdataset index."""
    try:
        lines = path.read_text().splitlines()
        version, count = lines[0].split()
        if version != INDEX_VERSION or int(count) != len(lines) - 1:
            raise ValueError(f"header {lines[0]!r}")
        offsets, sizes, names = [], [], []
        for line in lines[1:]:
            parts = line.split()
            for k in range(0, len(parts), 4):
                if parts[k] in IMAGE_EXTS:
                    offsets.append(int(parts[k + 1]))
                    sizes.append(int(parts[k + 2]))
                    names.append(parts[k + 3])
                    break
            else:
                raise ValueError(f"no image in {line!r}")
    except (OSError, ValueError, IndexError) as exc:
        raise DataError(
            f"{path}: unreadable shard index ({exc}); re-pack with python -m dali_pipes.pack"
        ) from None
    return np.asarray(offsets, np.int64), np.asarray(sizes, np.int64), names


@dataclass(frozen=True, eq=False)
class ShardLayout:
    """Where each sample of a packed split lives: shard number, offset and size; and which
    sample it is (its identity, :func:`key_identity`)."""

    tars: tuple[str, ...]
    shard: np.ndarray = field(repr=False)  # int64 per sample, ascending (shards in order)
    offset: np.ndarray = field(repr=False)
    size: np.ndarray = field(repr=False)
    #: the reading window: an epoch shuffles samples within runs of this many (0: off)
    shuffle_buffer: int = 0
    #: int64 per sample: its file's index in the packed folder (None: its position)
    ids: np.ndarray | None = field(default=None, repr=False)

    @property
    def num_shards(self) -> int:
        """How many shards the pack has."""
        return len(self.tars)

    def members(self, shard: int) -> np.ndarray:
        """The sample indices of one shard, in file order (samples are stored shard by shard)."""
        lo, hi = np.searchsorted(self.shard, [shard, shard + 1])
        return np.arange(lo, hi, dtype=np.int64)


def read_manifest(root: str | os.PathLike[str]) -> dict[str, Any]:
    """``dataset.json`` of a complete pack, or a one-line error saying what to do."""
    top = Path(root).expanduser()
    path = top / MANIFEST
    if not top.is_dir():
        raise DataError(
            f"data.root {top} does not exist; pack a folder first: "
            f"python -m dali_pipes.pack data=folder data.root=DIR out={top}"
        )
    if not path.exists():
        raise DataError(
            f"{top}: incomplete pack (no {MANIFEST}; the pack was interrupted or is still "
            f"running); rerun the same python -m dali_pipes.pack command to finish it"
        )
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable ({exc}); re-pack into a new directory") from None
    if manifest.get("format") != FORMAT:
        raise DataError(f"{path}: not a {FORMAT} pack; re-pack with python -m dali_pipes.pack")
    return manifest


def open_split(
    root: str | os.PathLike[str], split: str, shuffle_buffer: int = 0
) -> tuple[list[str], np.ndarray, list[str], ShardLayout]:
    """(display names, labels, classes, layout) of one split of a complete pack."""
    top = Path(root).expanduser()
    manifest = read_manifest(top)
    part = manifest["splits"][split]
    tars: list[str] = []
    names: list[str] = []
    labels: list[int] = []
    shard_ids, offsets, sizes, ids = [], [], [], []
    for number, entry in enumerate(manifest["parts"][part]["shards"]):
        tar = str(top / entry["tar"])
        meta_path = top / entry["meta"]
        if Path(tar).is_file() and meta_path.is_file():
            require_index(tar)  # else the message below would blame the whole shard
        if not shard_complete(meta_path.parent, int(entry["number"])):
            raise DataError(
                f"{tar}: shard missing or truncated; re-pack with python -m dali_pipes.pack"
            )
        meta = json.loads(meta_path.read_text())
        off, size, members = read_index(top / entry["index"])
        if len(members) != meta["samples"]:
            raise DataError(f"{tar}: index and sidecar disagree; re-pack it")
        tars.append(tar)
        names += [f"{tar}:{m}" for m in members]
        ids += [key_identity(m, tar) for m in members]
        labels += meta["labels"]
        shard_ids.append(np.full(len(members), number, np.int64))
        offsets.append(off)
        sizes.append(size)
    layout = ShardLayout(
        tuple(tars),
        np.concatenate(shard_ids) if shard_ids else np.zeros(0, np.int64),
        np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
        np.concatenate(sizes) if sizes else np.zeros(0, np.int64),
        shuffle_buffer,
        np.asarray(ids, np.int64),
    )
    return names, np.asarray(labels, np.int64), list(manifest["classes"]), layout


class ShardReader:
    """Reads samples out of shards by position; safe to use from threads and workers.

    Descriptors are opened lazily per process (a forked DataLoader worker opens its own).
    """

    def __init__(self, layout: ShardLayout) -> None:
        self.layout = layout
        self._fds: dict[int, int] = {}
        self._pid = -1

    def __getstate__(self) -> dict[str, Any]:
        return {"layout": self.layout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["layout"])  # type: ignore[misc]

    def _fd(self, shard: int) -> int:
        if self._pid != os.getpid():  # forked: the parent's descriptors are not ours to use
            self._fds, self._pid = {}, os.getpid()
        fd = self._fds.get(shard)
        if fd is None:
            path = self.layout.tars[shard]
            try:
                fd = self._fds[shard] = os.open(path, os.O_RDONLY)
            except OSError as exc:
                raise unreadable(path, exc, "the shard") from None
        return fd

    def read(self, indices: Sequence[int] | np.ndarray) -> list[np.ndarray]:
        """The encoded bytes of each sample, in the order given."""
        idx = np.asarray(indices, np.int64)
        out: list[np.ndarray] = [np.empty(0, np.uint8)] * len(idx)
        lay = self.layout
        order = np.lexsort((lay.offset[idx], lay.shard[idx]))
        run: list[int] = []

        def flush() -> None:
            first, last = idx[run[0]], idx[run[-1]]
            start = int(lay.offset[first])
            end = int(lay.offset[last] + lay.size[last])
            path = lay.tars[int(lay.shard[first])]
            try:
                blob = os.pread(self._fd(int(lay.shard[first])), end - start, start)
            except OSError as exc:
                raise unreadable(path, exc, "the shard") from None
            if len(blob) != end - start:
                raise DataError(f"{path}: shard is truncated; re-pack it")
            buf = np.frombuffer(blob, np.uint8)
            for k in run:
                i = idx[k]
                a = int(lay.offset[i]) - start
                out[k] = buf[a : a + int(lay.size[i])]

        for k in order:
            i = idx[k]
            if run:
                prev = idx[run[-1]]
                same = lay.shard[prev] == lay.shard[i]
                if not same or lay.offset[i] - (lay.offset[prev] + lay.size[prev]) > _MERGE_GAP:
                    flush()
                    run = []
            run.append(int(k))
        if run:
            flush()
        return out

    def close(self) -> None:
        """Close the open shard files."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}
