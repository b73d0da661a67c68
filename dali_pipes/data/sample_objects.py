"""The embedded sample data with objects: real JPEG files and COCO annotations whose boxes
and masks are exact, generated deterministically, no download (``data=sample_objects``).

Each image holds one to four drawn objects (circle, ring, square, triangle) that do not
touch, on a noisy gradient background, in COCO's layout as published (``train2017/``,
``val2017/``, ``annotations/instances_{train,val}2017.json``): every object's box is the
tight box of its pixels and its mask (uncompressed RLE, as COCO stores one) is exactly its
pixels. The category ids have gaps, as COCO's do, so the contiguous labels are exercised;
some images have no object at all. Written once into the cache folder, atomically (see
:mod:`dali_pipes.data.sample_set`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dali_pipes.data.sample_set import contrasting, default_cache_dir, publish

VERSION = 1
#: The objects' categories as COCO lists them: (id, name); the ids have gaps.
CATEGORIES = ((3, "circle"), (5, "ring"), (8, "square"), (13, "triangle"))


def ensure_sample_objects(root: str | None, train_images: int, val_images: int) -> Path:
    """The dataset's folder, generated if absent."""
    readme = (
        f"dali_pipes sample objects, version {VERSION}: {train_images} training and "
        f"{val_images} validation images of drawn objects "
        f"({', '.join(name for _, name in CATEGORIES)}) with COCO annotations.\n"
    )
    return _ensure(root, "sample-objects", (train_images, val_images), readme, write_split)


def _ensure(
    root: str | None,
    name: str,
    counts: tuple[int, int],
    readme: str,
    write: Callable[[Path, str, int], None],
) -> Path:
    """The folder ``name`` of ``counts`` (training, validation) images under ``root`` (the
    cache folder if None), each split written by ``write`` if the folder is absent."""
    base = Path(root).expanduser() if root else default_cache_dir()
    target = base / f"{name}-v{VERSION}-{counts[0]}x{counts[1]}"
    if not target.is_dir():

        def draw(tmp: Path) -> None:
            for split, count in zip(("train", "val"), counts, strict=True):
                write(tmp, split, count)

        publish(target, readme, draw)
    return target


def ensure_sample_segmentation(root: str | None, train_images: int, val_images: int) -> Path:
    """The sample data's folder with masks (the same images as the sample objects, in the
    paired-folders layout: ``images/<split>/`` and ``masks/<split>/``), generated if
    absent. Each mask pixel is its object's class, 1..4 in the order of
    :data:`CATEGORIES` (``circle`` is 1), 0 the background."""
    readme = (
        f"dali_pipes sample segmentation data, version {VERSION}: {train_images} "
        f"training and {val_images} validation images of drawn objects with a mask "
        f"each (1..4: {', '.join(name for _, name in CATEGORIES)}; 0: background).\n"
    )
    counts = (train_images, val_images)
    return _ensure(root, "sample-segmentation", counts, readme, write_masks_split)


def write_masks_split(root: Path, split: str, count: int) -> None:
    """``count`` images of ``split`` and their masks (grey PNGs) under ``root``."""
    from PIL import Image

    images, masks = root / "images" / split, root / "masks" / split
    images.mkdir(parents=True)
    masks.mkdir(parents=True)
    label = {category: k + 1 for k, (category, _) in enumerate(CATEGORIES)}
    for i in range(count):
        image_id = 1000 * (1 if split == "train" else 2) + i
        jpeg, height, width, objects = render(np.random.default_rng((VERSION, image_id)))
        (images / f"{image_id:012d}.jpg").write_bytes(jpeg)
        mask = np.zeros((height, width), np.uint8)
        for category, pixels in objects:
            mask[pixels] = label[category]
        Image.fromarray(mask, mode="L").save(masks / f"{image_id:012d}.png")


def write_split(root: Path, split: str, count: int) -> None:
    """``count`` images of ``split`` and their annotations file under ``root``."""
    folder = root / f"{split}2017"
    folder.mkdir(parents=True)
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for i in range(count):
        image_id = 1000 * (1 if split == "train" else 2) + i
        name = f"{image_id:012d}.jpg"
        jpeg, height, width, objects = render(np.random.default_rng((VERSION, image_id)))
        (folder / name).write_bytes(jpeg)
        images.append({"id": image_id, "file_name": name, "height": height, "width": width})
        for category, mask in objects:
            ys, xs = np.nonzero(mask)
            x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category,
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "area": int(mask.sum()),
                    "iscrowd": 0,
                    "segmentation": uncompressed_rle(mask),
                }
            )
    categories = [{"id": i, "name": n, "supercategory": "shape"} for i, n in CATEGORIES]
    (root / "annotations").mkdir(exist_ok=True)
    content = {"images": images, "annotations": annotations, "categories": categories}
    (root / "annotations" / f"instances_{split}2017.json").write_text(json.dumps(content))


def uncompressed_rle(mask: np.ndarray) -> dict[str, Any]:
    """A mask as COCO's uncompressed RLE: run lengths over the pixels in column-major
    order, starting with a run of zeros."""
    flat = np.asarray(mask, np.uint8).flatten(order="F")
    changes = np.flatnonzero(np.diff(flat)) + 1
    edges = np.concatenate([[0], changes, [len(flat)]])
    counts = np.diff(edges).tolist()
    if flat[0]:
        counts = [0, *counts]
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def render(rng: np.random.Generator) -> tuple[bytes, int, int, list[tuple[int, np.ndarray]]]:
    """One image: its JPEG bytes, height, width, and each object's category and mask."""
    h, w = (int(v) for v in rng.integers(160, 361, size=2))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c0, c1 = rng.uniform(0, 255, size=(2, 3)).astype(np.float32)
    t = (xx / w if rng.random() < 0.5 else yy / h)[..., None]
    img = c0 * (1 - t) + c1 * t
    taken = np.zeros((h, w), bool)
    objects: list[tuple[int, np.ndarray]] = []
    for _ in range(int(rng.integers(0, 5))):
        for _attempt in range(20):
            kind = int(rng.integers(len(CATEGORIES)))
            r = rng.uniform(0.08, 0.2) * min(h, w)
            cy, cx = rng.uniform(r, h - r), rng.uniform(r, w - r)
            mask = _shape(CATEGORIES[kind][1], yy, xx, cy, cx, r, rng)
            grown = np.zeros_like(mask)  # a two-pixel gap: objects never touch
            ys, xs = np.nonzero(mask)
            grown[max(ys.min() - 2, 0) : ys.max() + 3, max(xs.min() - 2, 0) : xs.max() + 3] = True
            if mask.any() and not (grown & taken).any():
                taken |= grown
                img[mask] = contrasting(rng, img.reshape(-1, 3).mean(axis=0))
                objects.append((CATEGORIES[kind][0], mask))
                break
    img += rng.normal(0, 6, size=img.shape).astype(np.float32)
    pixels = torch.from_numpy(np.clip(img, 0, 255).astype(np.uint8)).permute(2, 0, 1)
    from torchvision.io import encode_jpeg

    jpeg = bytes(encode_jpeg(pixels.contiguous(), quality=92).numpy())
    return jpeg, h, w, objects


def _shape(
    name: str,
    yy: np.ndarray,
    xx: np.ndarray,
    cy: float,
    cx: float,
    r: float,
    rng: np.random.Generator,
) -> np.ndarray:
    py, px = yy + 0.5, xx + 0.5  # pixel centres
    if name == "circle":
        return (py - cy) ** 2 + (px - cx) ** 2 <= r**2
    if name == "ring":
        d = np.sqrt((py - cy) ** 2 + (px - cx) ** 2)
        return (d <= r) & (d >= r * rng.uniform(0.45, 0.65))
    if name == "square":
        return (np.abs(py - cy) <= r * 0.85) & (np.abs(px - cx) <= r * 0.85)
    rel = (py - (cy - r)) / (2 * r)  # the triangle: 0 at the apex, 1 at the base
    return (rel >= 0) & (rel <= 1) & (np.abs(px - cx) <= rel * r)
