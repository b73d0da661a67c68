"""Which Parquet files hold a split, and what their schema says: the Hugging Face Hub layout.

A dataset on the Hub stores each split as ``data/<split>-0000K-of-0000N.parquet`` (a hash
may follow the numbers; a single file may be ``<split>.parquet``). ``data.root`` names the
dataset's folder (or its ``data/`` folder), local or ``s3://bucket/prefix``. The split a
file belongs to is read from its name; every file a name promises (``-of-0000N``) must be
there. Classes come from the ClassLabel names the ``datasets`` library writes into the
schema's ``huggingface`` metadata; without them the labels name themselves (``"0"``,
``"1"``, ...). Every mistake (no such root, no file of the split, a file missing from a
split, a missing or mistyped column) is one line naming the file and what to do.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dali_pipes.data.storage import Storage, is_url, join
from dali_pipes.errors import ConfigError, DataError

#: ``train-00000-of-00004.parquet``, ``train-00000-of-00004-2a1b3c4d.parquet``, ``test.parquet``.
FILE_NAME = re.compile(
    r"(?P<split>\w+?)(?:-(?P<k>\d{5})-of-(?P<n>\d{5}))?(?:-[0-9a-f]{6,})?\.parquet"
)
#: The names the Hub gives a validation split, in the order ``data.val_split=null`` tries.
VALIDATION_NAMES = ("validation", "val")


def list_parquet(root: str, storage: Storage) -> dict[str, list[str]]:
    """Each split's files under ``root`` (or ``root/data``), in part order; one line when
    there is no such folder or no Parquet file named like a split in it."""
    names = _listing(root) if is_url(root) else _local_listing(root)
    splits: dict[str, list[tuple[int, int, str]]] = {}
    for folder, name in names:
        match = FILE_NAME.fullmatch(name)
        if match is None:
            continue
        part, count = int(match["k"] or 0), int(match["n"] or 1)
        splits.setdefault(match["split"], []).append((part, count, join(folder, name)))
    if not splits:
        raise DataError(
            f"data.root {root} holds no Parquet files named <split>-00000-of-00001.parquet "
            f"(the Hugging Face Hub layout, in {root}/data or {root}); check data.root"
        )
    return {split: _complete(split, parts) for split, parts in splits.items()}


def _local_listing(root: str) -> list[tuple[str, str]]:
    top = Path(root).expanduser()
    if not top.is_dir():
        what = "does not exist" if not top.exists() else "is not a directory"
        raise DataError(f"data.root {root} {what}; set data.root to a dataset folder")
    folder = top / "data" if (top / "data").is_dir() else top
    return sorted((str(folder), p.name) for p in folder.iterdir() if p.suffix == ".parquet")


def _listing(root: str) -> list[tuple[str, str]]:
    from dali_pipes.data.s3 import list_keys, split_url

    prefix = split_url(root)[1]
    top = root.rstrip("/")
    start = len(prefix) + 1 if prefix else 0
    found = [key[start:] for key in list_keys(root) if key.endswith(".parquet")]
    in_data = [k for k in found if k.startswith("data/") and k.count("/") == 1]
    chosen = in_data or [k for k in found if "/" not in k]
    return sorted((join(top, *k.split("/")[:-1]), k.rpartition("/")[2]) for k in chosen)


def _complete(split: str, parts: list[tuple[int, int, str]]) -> list[str]:
    """The split's files in part order, or one line naming the first one missing."""
    parts.sort()
    count = parts[0][1]
    have = {part for part, _, _ in parts}
    missing = [k for k in range(count) if k not in have]
    if missing or any(n != count for _, n, _ in parts):
        folder = parts[0][2].rpartition("/")[0]
        first = f"{split}-{missing[0]:05d}-of-{count:05d}.parquet" if missing else "a part"
        raise DataError(
            f"{folder}: split {split!r} is incomplete ({first} missing of {count} parts "
            f"named, {len(parts)} found); download the dataset again"
        )
    return [path for _, _, path in parts]


def choose_split(found: dict[str, list[str]], split: str, train: str, val: str | None) -> str:
    """The file-name split the loaders' ``split`` (``train`` or ``val``) reads, or one line
    listing the splits there are."""
    wanted = [train] if split == "train" else [val] if val else list(VALIDATION_NAMES)
    for name in wanted:
        if name in found:
            return name
    key = "data.train_split" if split == "train" else "data.val_split"
    raise DataError(
        f"no Parquet files of split {' or '.join(wanted)!s} in the dataset "
        f"({', '.join(sorted(found))} found); set {key} to one of them"
    )


@dataclass(frozen=True)
class Columns:
    """Where the images and labels are in a split's files, checked against every file."""

    image: str
    label: str
    image_path: list[str]  # the column to read: the struct's ``bytes``, or the column itself


def check_columns(schema: Any, path: str, image: str, label: str) -> Columns:
    """The image and label columns of ``schema`` (a ``pyarrow.Schema`` of ``path``),
    checked: one line for a column that is missing or of a type that cannot hold them."""
    import pyarrow as pa

    names = schema.names
    for key, column in (("data.image_column", image), ("data.label_column", label)):
        if column not in names:
            raise DataError(
                f"{path}: no column {column!r} (columns: {', '.join(names)}); set {key}"
            )
    kind = schema.field(image).type
    if _is_binary(kind):
        read = [image]
    elif (
        pa.types.is_struct(kind)
        and kind.get_field_index("bytes") >= 0
        and _is_binary(kind.field("bytes").type)
    ):
        read = [f"{image}.bytes"]
    else:
        raise DataError(
            f"{path}: column {image!r} is {kind}, not images (the Hub's Image struct of "
            "bytes and path, or binary); set data.image_column to the image column"
        )
    if not pa.types.is_integer(schema.field(label).type):
        raise DataError(
            f"{path}: column {label!r} is {schema.field(label).type}, not integer labels "
            "(a ClassLabel); set data.label_column to the label column"
        )
    return Columns(image, label, read)


def _is_binary(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def class_names(schema: Any, label: str) -> tuple[str, ...] | None:
    """The ClassLabel names of column ``label`` from the ``huggingface`` metadata the
    ``datasets`` library writes, None when there are none."""
    raw = (schema.metadata or {}).get(b"huggingface")
    if not raw:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    features = (meta.get("info") or meta).get("features") or {}
    feature = features.get(label) if isinstance(features, dict) else None
    names = feature.get("names") if isinstance(feature, dict) else None
    return tuple(str(n) for n in names) if isinstance(names, list) and names else None


class RemoteFile(io.RawIOBase):
    """An object in a bucket as the seekable file pyarrow reads: each read is a ranged GET
    through the storage (its retries and deadlines), so only the footer and the column
    chunks asked for are fetched, never the whole object."""

    def __init__(self, url: str, size: int, storage: Storage) -> None:
        super().__init__()
        self.url, self.size, self.storage, self.pos = url, size, storage, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` from the current position with one ranged GET; the bytes read
        (0 at the end). A GET that fails is an ``OSError`` pyarrow reports."""
        view = memoryview(buffer).cast("B")
        length = min(len(view), self.size - self.pos)
        if length <= 0:
            return 0
        [blob] = self.storage.read_ranges([(self.url, self.pos, length)])
        if isinstance(blob, DataError):
            raise OSError(str(blob))
        view[: len(blob)] = blob
        self.pos += len(blob)
        return len(blob)


def require_pyarrow() -> None:
    """One line saying how to install pyarrow, the optional extra ``data=parquet`` needs."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ConfigError(
            "data=parquet reads Parquet files with pyarrow, which is not installed: "
            "pip install 'dali_pipes[parquet]' (or pip install pyarrow)"
        ) from None


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (pyarrow's may span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
