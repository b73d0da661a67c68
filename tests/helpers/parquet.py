"""Parquet datasets in the Hugging Face Hub layout, written with pyarrow from image folders
(no download): ``<out>/data/<split>-0000K-of-0000N.parquet``, an ``image`` struct of
``bytes`` and ``path``, an int64 ``label`` and the ``huggingface`` schema metadata with the
ClassLabel names, as the ``datasets`` library writes them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from torchvision.datasets import ImageFolder

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def photo_subset(photos: Path, out: Path, classes: int = 3, per_class: int = 3) -> Path:
    """An ImageFolder tree of the first ``per_class`` photos of the first ``classes``
    class folders (copies), so a test decodes a few real photos, not all of them."""
    for folder in sorted(p for p in photos.iterdir() if p.is_dir())[:classes]:
        for path in sorted(folder.glob("*.jp*g"))[:per_class]:
            (out / folder.name).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out / folder.name / path.name)
    return out


def hub_metadata(
    classes: Sequence[str] | None, image: str = "image", label: str = "label"
) -> dict[bytes, bytes]:
    """The schema metadata ``datasets`` writes: the features, with ClassLabel names."""
    label_feature: dict[str, Any] = (
        {"names": list(classes), "_type": "ClassLabel"}
        if classes is not None
        else {"dtype": "int64", "_type": "Value"}
    )
    features = {image: {"_type": "Image"}, label: label_feature}
    return {b"huggingface": json.dumps({"info": {"features": features}}).encode()}


def folder_table(folder: Path, *, names: bool = True) -> pa.Table:
    """The folder's images in ImageFolder order as the Hub stores them."""
    dataset = ImageFolder(str(folder))
    images = [
        {"bytes": Path(path).read_bytes(), "path": Path(path).name} for path, _ in dataset.samples
    ]
    table = pa.table(
        {
            "image": pa.array(images, type=IMAGE),
            "label": pa.array(dataset.targets, type=pa.int64()),
        }
    )
    return table.replace_schema_metadata(hub_metadata(dataset.classes if names else None))


def write_split(
    table: pa.Table, out: Path, split: str, *, files: int = 2, rows_per_group: int = 3
) -> list[Path]:
    """``table`` as ``out/data/<split>-0000K-of-0000N.parquet`` (``files`` parts, row
    groups of ``rows_per_group``)."""
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    per = -(-table.num_rows // files)
    written = []
    for k in range(files):
        path = data / f"{split}-{k:05d}-of-{files:05d}.parquet"
        pq.write_table(table.slice(k * per, per), path, row_group_size=rows_per_group)
        written.append(path)
    return written


def write_hub(
    folder: Path,
    out: Path,
    splits: Sequence[str] = ("train", "validation"),
    *,
    files: int = 2,
    rows_per_group: int = 3,
    names: bool = True,
) -> Path:
    """A Hub-layout dataset whose every split holds ``folder``'s images."""
    table = folder_table(folder, names=names)
    for split in splits:
        write_split(table, out, split, files=files, rows_per_group=rows_per_group)
    return out
