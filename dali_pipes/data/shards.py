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
is drawn from the identity (:meth:`dali_pipes.data.sources.ShardSource.identity`), so a photo
gets the same crop and flip from its shard as from the folder, wherever packing put it.

``OUT`` is a folder or a bucket prefix (``s3://bucket/prefix``): every file is written
whole or not at all through its :class:`~dali_pipes.data.storage.Storage` (a temporary file
renamed into place; one PUT per object), so a reader never takes an interrupted shard as
complete. Reading needs no tar parsing: each sample's offset and size come from the index,
and :class:`~dali_pipes.data.shard_reader.ShardReader` fetches a batch with positioned
reads of a file or ranged GETs of an object.
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

from dali_pipes.data.storage import Storage, is_url, join, storage_for
from dali_pipes.errors import DataError
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT

FORMAT = "dali_pipes.shards/1"  # written into every pack: never renamed with the module
MANIFEST = "dataset.json"
#: The plan of a pack (its fingerprint), written first: what a rerun resumes.
PLAN = ".pack-plan.json"
IMAGE_EXTS = ("jpg", "png", "webp")
INDEX_VERSION = "v1.2"
#: What to do when a shard cannot be written.
WRITE_HINT = "free space or choose another out=; rerunning the same command resumes the pack"
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


def image_ext(path: str, data: bytes = b"") -> str:
    """The member extension for a source image (``.jpeg`` is stored as ``jpg``); a sample
    whose name has no image extension (a Parquet row) gets its format's, from ``data``."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext in ("jpg", "jpeg"):
        return "jpg"
    if ext in IMAGE_EXTS or not data:
        return ext
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    return "webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else "jpg"


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


def write_shard(
    storage: Storage,
    directory: str,
    number: int,
    samples: Sequence[ShardSample],
    notes: dict[str, Any] | None = None,
) -> int:
    """Write one shard (tar, DALI index, sidecar), each file whole or not at all; return
    the tar's bytes.

    The sidecar goes last and records the tar's size, SHA-256 and MD5: a shard whose
    sidecar exists and matches its tar is complete (:func:`complete_shards`). ``notes``
    go into the sidecar too (how ``pack`` stored the shard's images). A failed
    write (a full disk, a read-only folder, a refused upload) leaves no partial file
    behind and is one line.
    """
    name = shard_name(number)
    tar_path, idx_path, meta_path = (
        join(directory, f"{name}{s}") for s in (".tar", ".idx", ".json")
    )
    lines: list[str] = []
    hashed = _Hashing()

    def fill(raw: BinaryIO) -> None:
        hashed.reset(raw)
        lines.clear()
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

    needed = sum(len(s.data) + 2048 for s in samples) + 10240
    storage.write(tar_path, fill, needed=needed, hint=WRITE_HINT)
    index = f"{INDEX_VERSION} {len(samples)}\n" + "\n".join(lines) + "\n"
    write_text(storage, idx_path, index)
    meta = {
        "samples": len(samples),
        "bytes": hashed.size,
        "sha256": hashed.sha256.hexdigest(),
        "md5": hashed.md5.hexdigest(),
        "labels": [s.label for s in samples],
        "sources": [s.source for s in samples],
        **(notes or {}),
    }
    write_text(storage, meta_path, json.dumps(meta))
    return hashed.size


class _Hashing:
    """A write-only file object that hashes and counts what goes through it."""

    def __init__(self) -> None:
        self.reset(None)

    def reset(self, raw: BinaryIO | None) -> None:
        """Start over, writing to ``raw`` (a retried write fills a new file)."""
        self.raw, self.size = raw, 0
        self.sha256, self.md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)

    def write(self, data: bytes) -> int:
        assert self.raw is not None
        self.sha256.update(data)
        self.md5.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def tell(self) -> int:
        return self.size


def write_text(storage: Storage, path: str, text: str) -> None:
    """Write ``text`` (UTF-8) whole or not at all."""
    data = text.encode()
    storage.write(path, lambda f: f.write(data), needed=len(data), hint=WRITE_HINT)


def write_json(storage: Storage, path: str, obj: Any) -> None:
    """Write ``obj`` as JSON whole or not at all."""
    write_text(storage, path, json.dumps(obj, indent=1))


def complete_shards(
    storage: Storage, directory: str, numbers: Sequence[int], *, verify: bool = False
) -> dict[int, dict[str, Any]]:
    """The sidecar of each complete shard among ``numbers``: its sidecar and index exist
    and its tar has the size the sidecar records. With ``verify`` (``pack`` before keeping
    a shard) the tar's content is checked too: a shard corrupted in place keeps its size,
    not its checksum (an object whose ETag is the recorded MD5 needs no reading back).
    Readers check sizes only: hashing every shard would read the whole dataset first."""
    names = [shard_name(n) for n in numbers]
    paths = [join(directory, f"{n}{ext}") for n in names for ext in (".tar", ".idx", ".json")]
    stats = storage.stat(paths)
    present = [i for i in range(len(names)) if all(stats[3 * i : 3 * i + 3])]
    metas = storage.read_many([paths[3 * i + 2] for i in present], DEFAULT_READ_TIMEOUT)
    complete: dict[int, dict[str, Any]] = {}
    for i, blob in zip(present, metas, strict=True):
        tar = stats[3 * i]
        try:
            meta = json.loads(blob.tobytes()) if not isinstance(blob, DataError) else {}
        except ValueError:
            meta = {}
        if tar is None or tar[0] != meta.get("bytes"):
            continue
        if verify and tar[1] != meta.get("md5") and not _same_content(storage, paths[3 * i], meta):
            continue
        complete[numbers[i]] = meta
    return complete


def _same_content(storage: Storage, path: str, meta: dict[str, Any]) -> bool:
    """Whether the file's SHA-256 is the one recorded (a pack without one: assumed)."""
    expected = meta.get("sha256")
    if expected is None:
        return True
    digest, size, step = hashlib.sha256(), int(meta["bytes"]), 8 * 2**20
    for start in range(0, size, step):
        [block] = storage.read_ranges([(path, start, min(step, size - start))])
        if isinstance(block, DataError):
            return False
        digest.update(block)
    return digest.hexdigest() == expected


# --------------------------------------------------------------------------- reading


def index_path(tar: str) -> str:
    """The DALI webdataset index that goes with a shard: ``shard-N.tar`` -> ``shard-N.idx``."""
    return (tar[: -len(".tar")] if tar.endswith(".tar") else tar) + ".idx"


def require_index(tar: str) -> str:
    """The shard's index path, or a one-line error naming it and the commands that make it.

    DALI's webdataset reader cannot read a shard without its index, and its own error for
    that is a multi-line C++ message; the index is what ``pack`` writes (or DALI's
    ``wds2idx`` tool, which writes the same file from the tar alone).
    """
    idx = index_path(tar)
    if storage_for(idx).stat([idx])[0] is None:
        shards, _, name = tar.rpartition("/")
        raise DataError(
            f"{idx}: shard index missing (DALI's webdataset reader cannot read "
            f"{name} without it); write it with: wds2idx {tar} {idx} -- or rerun "
            f"the python -m dali_pipes.pack command that wrote {shards.rpartition('/')[0]}"
        )
    return idx


def read_index(text: str, path: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Image offsets, sizes and member names from the text of a DALI webdataset index
    (``path`` names it in the error)."""
    try:
        lines = text.splitlines()
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
    except (ValueError, IndexError) as exc:
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
    #: bytes per ranged read of a shard in a bucket (``data.block_mb``)
    block_bytes: int = 8 * 2**20
    #: the long side images were stored at, at most (``pack.max_side``; None: as they were)
    max_side: int | None = None

    @property
    def on_disk(self) -> bool:
        """Whether the shards are local files (DALI's webdataset reader reads those)."""
        return not any(is_url(t) for t in self.tars[:1])

    @property
    def format_name(self) -> str:
        """The shards' stored format (:class:`~dali_pipes.data.interface.StoredFormat`):
        WebDataset tars with DALI's index files."""
        return "webdataset"

    @property
    def num_shards(self) -> int:
        """How many shards the pack has."""
        return len(self.tars)

    @property
    def num_blocks(self) -> int:
        """The shards as the sampler's blocks (:class:`~dali_pipes.data.interface.Blocks`)."""
        return len(self.tars)

    def members(self, shard: int) -> np.ndarray:
        """The sample indices of one shard, in file order (samples are stored shard by shard)."""
        lo, hi = np.searchsorted(self.shard, [shard, shard + 1])
        return np.arange(lo, hi, dtype=np.int64)


def read_manifest(root: str | os.PathLike[str]) -> dict[str, Any]:
    """``dataset.json`` of a complete pack (a folder or a bucket prefix), or a one-line
    error saying what to do."""
    top = _root(root)
    storage = storage_for(top)
    if not is_url(top) and not Path(top).is_dir():
        raise DataError(
            f"data.root {top} does not exist; pack a folder first: "
            f"python -m dali_pipes.pack data=folder data.root=DIR out={top}"
        )
    path = join(top, MANIFEST)
    manifest_stat, plan_stat = storage.stat([path, join(top, PLAN)])
    if manifest_stat is None and plan_stat is None and is_url(top):
        raise DataError(
            f"{top} holds no pack (no {MANIFEST}); check data.root, or pack a folder first: "
            f"python -m dali_pipes.pack data=folder data.root=DIR out={top}"
        )
    if manifest_stat is None:
        raise DataError(
            f"{top}: incomplete pack (no {MANIFEST}; the pack was interrupted or is still "
            f"running); rerun the same python -m dali_pipes.pack command to finish it"
        )
    [blob] = storage.read_many([path], DEFAULT_READ_TIMEOUT)
    try:
        if isinstance(blob, DataError):
            raise blob
        manifest: dict[str, Any] = json.loads(blob.tobytes())
    except (DataError, ValueError) as exc:
        raise DataError(f"{path}: unreadable ({exc}); re-pack into a new directory") from None
    if manifest.get("format") != FORMAT:
        raise DataError(f"{path}: not a {FORMAT} pack; re-pack with python -m dali_pipes.pack")
    return manifest


def _root(root: str | os.PathLike[str]) -> str:
    """A pack's root as its files are named: a URL as given, a path made absolute."""
    return str(root).rstrip("/") if is_url(root) else str(Path(root).expanduser())


def open_split(
    root: str | os.PathLike[str], split: str, shuffle_buffer: int = 0, block_mb: float = 8.0
) -> tuple[list[str], np.ndarray, list[str], ShardLayout]:
    """(display names, labels, classes, layout) of one split of a complete pack; the
    sidecars and indices are read concurrently where they are objects in a bucket."""
    top = _root(root)
    storage = storage_for(top)
    manifest = read_manifest(top)
    entries = manifest["parts"][manifest["splits"][split]]["shards"]
    folders = sorted({join(top, e["tar"]).rpartition("/")[0] for e in entries})
    complete: dict[str, dict[int, dict[str, Any]]] = {}
    for folder in folders:
        numbers = [
            int(e["number"]) for e in entries if join(top, e["tar"]).startswith(folder + "/")
        ]
        complete[folder] = complete_shards(storage, folder, numbers)
    indices = storage.read_many([join(top, e["index"]) for e in entries], DEFAULT_READ_TIMEOUT)
    tars: list[str] = []
    names: list[str] = []
    labels: list[int] = []
    shard_ids, offsets, sizes, ids = [], [], [], []
    for number, (entry, index) in enumerate(zip(entries, indices, strict=True)):
        tar = join(top, entry["tar"])
        meta = complete[tar.rpartition("/")[0]].get(int(entry["number"]))
        if meta is None:
            if isinstance(index, DataError) and storage.stat([tar])[0] is not None:
                require_index(tar)  # else the message below would blame the whole shard
            raise DataError(
                f"{tar}: shard missing or truncated; re-pack with python -m dali_pipes.pack"
            )
        if isinstance(index, DataError):
            raise index
        off, size, members = read_index(index.tobytes().decode(), join(top, entry["index"]))
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
        max(1, int(block_mb * 2**20)),
        manifest.get("settings", {}).get("max_side"),
    )
    return names, np.asarray(labels, np.int64), list(manifest["classes"]), layout
