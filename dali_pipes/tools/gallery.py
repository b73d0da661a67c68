"""The op gallery ``python -m dali_pipes.show show.gallery=true`` draws: every registered
op at its preview settings (:attr:`dali_pipes.augment.Op.previews`), then every
auto-augment operation alone at a few RandAugment magnitudes, on the same photos.

Each image goes through the torch backend's own per-sample path (decode, the crop's
geometry, :meth:`~dali_pipes.augment.Pipeline.apply_torch`) with parameters drawn from
(seed 0, epoch 0, photo), so a row differs from the next only by its op.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from dali_pipes.augment import Pipeline
from dali_pipes.augment.auto import slots
from dali_pipes.augment.base import CropOp, Op, build_op, op_names
from dali_pipes.augment.geometry_torch import apply_row
from dali_pipes.data.sources import IMAGE_EXTENSIONS
from dali_pipes.errors import DataError
from dali_pipes.image.decode import decode
from dali_pipes.tools.grid import Tile

#: Photos per setting, and the RandAugment magnitudes (of 31 bins) each operation is shown at.
PHOTOS = 3
MAGNITUDES = (5, 15, 30)
#: The photos shipped in the package (``python -m dali_pipes.selfcheck`` decodes them too).
SHIPPED = Path(__file__).resolve().parents[1] / "selfcheck" / "photos"


def pick_photos(folder: Path, count: int = PHOTOS) -> list[Path]:
    """``count`` images of ``folder`` (searched recursively), spread over its sorted list."""
    found = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
    )
    if not found:
        raise DataError(f"{folder}: no images for the gallery; set show.photos to a folder of them")
    step = max(1, len(found) // count)
    return found[::step][:count]


def settings() -> Iterator[tuple[str, list[tuple[str, Op]]]]:
    """(row title, [(caption, op), ...]) for every row of the gallery."""
    for name in op_names(crop=False):
        row = [(_caption(p), _op(name, p)) for p in (_previews(name) or ({},))]
        yield name, row
    for operation, span in slots.table("standard").items():
        magnitudes = MAGNITUDES if span is not None else MAGNITUDES[-1:]
        row = []
        for m in magnitudes:
            params = {"num_ops": 1, "magnitude": m, "operations": [operation]}
            row.append((f"magnitude {m}" if span is not None else "", _op("randaugment", params)))
        yield operation, row


def _previews(name: str) -> tuple[Mapping[str, Any], ...]:
    op = build_op({"op": name}, "show.gallery")
    return type(op).previews


def _op(name: str, params: Mapping[str, Any]) -> Op:
    """Op ``name`` with ``params`` over its defaults, and ``p`` at 1 where it has one."""
    op = build_op({"op": name}, "show.gallery")
    forced = {"p": 1.0} if any(f.name == "p" for f in fields(op)) else {}  # type: ignore[arg-type]
    return build_op({"op": name, **params, **forced}, f"show.gallery.{name}")


def _caption(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in params.items()) or "defaults"


def gallery(photos: list[Path], side: int) -> tuple[list[list[Tile]], list[str]]:
    """The gallery's rows of tiles (each setting on each photo) and their titles."""
    images = [decode(str(p)) for p in photos]
    crop = build_op({"op": "resize_center_crop", "size": side, "resize": side}, "show", crop=True)
    assert isinstance(crop, CropOp)
    rows: list[list[Tile]] = [
        [Tile(_apply(Pipeline(crop), images, j), p.name) for j, p in enumerate(photos)]
    ]
    titles = ["original"]
    for title, row in settings():
        tiles = []
        for caption, op in row:
            pipeline = Pipeline(crop, (op,))
            tiles += [
                Tile(_apply(pipeline, images, j), "" if j else caption) for j in range(len(images))
            ]
        rows.append(tiles)
        titles.append(title)
    return rows, titles


def _apply(pipeline: Pipeline, images: list[torch.Tensor], j: int) -> torch.Tensor:
    """Photo ``j`` through ``pipeline`` as the torch backend does it."""
    sizes = [image.shape[-2:] for image in images]
    draw = pipeline.draw(sizes, list(range(len(images))), seed=0, epoch=0)
    whole = pipeline.apply_before_torch(images[j], draw, j)
    return pipeline.apply_torch(apply_row(whole, draw.geometry, j), draw, j)
