"""A COCO-layout dataset over real photos, so detection loaders are timed on real JPEGs.

Usage::

    python benchmarks/detection_photos.py SRC OUT [--seed 0]
    python -m dali_pipes.bench data=coco data.root=OUT augment=ssd \\
        'bench.candidates=[baseline,torch,dali-cpu,dali-raw]' bench.out=...

Why: the embedded sample objects are drawn images of 180-360 px, cheap to decode; a
detection loader spends most of its time decoding and resizing, so its speed must be
measured on photos. There is no COCO copy here, so the boxes are drawn: each photo of
``SRC``'s ImageFolder tree (listed as the loaders list it) gets 1-6 boxes of 5-60 % of its
sides at places and categories drawn from ``--seed`` (3 categories). The boxes are
numbers only: they decide where SSD's IoU crop may cut, not what is decoded.

What it writes: ``OUT/train2017/<class>__<name>`` links to the photos (the same bytes),
``OUT/annotations/instances_train2017.json`` (COCO's format, each image's height and width
read from its header), and the same for ``val2017``. The tree is built beside ``OUT`` and
renamed into place at the end; an existing ``OUT`` is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from dali_pipes.data.sources import discover_folder

CATEGORIES = [{"id": k, "name": name} for k, name in ((1, "thing"), (3, "stuff"), (7, "other"))]


def objects(rng: np.random.Generator, width: int, height: int) -> list[tuple[list[float], int]]:
    """1-6 drawn boxes (COCO's x, y, w, h) inside an image, each with a category id."""
    out = []
    for _ in range(int(rng.integers(1, 7))):
        w, h = rng.uniform(0.05, 0.6) * width, rng.uniform(0.05, 0.6) * height
        x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
        box = [round(float(v), 2) for v in (x, y, w, h)]
        out.append((box, int(CATEGORIES[int(rng.integers(0, 3))]["id"])))
    return out


def split(files: tuple[str, ...], folder: Path, seed: int) -> dict[str, Any]:
    """Links to ``files`` in ``folder`` and their annotations in COCO's format."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    images, annotations = [], []
    for image_id, path in enumerate(files, start=1):
        name = f"{Path(path).parent.name}__{Path(path).name}"
        os.symlink(os.path.abspath(path), folder / name)
        with Image.open(path) as im:
            width, height = im.size
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})
        for box, category in objects(rng, width, height):
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category,
                    "bbox": box,
                    "area": box[2] * box[3],
                    "iscrowd": 0,
                }
            )
    return {"images": images, "annotations": annotations, "categories": CATEGORIES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", help="an ImageFolder tree of photos (class folders)")
    parser.add_argument("out", help="the COCO-layout folder to write (must not exist)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists():
        print(f"detection_photos: {out} exists; choose another OUT", file=sys.stderr)
        return 2
    files = discover_folder(args.src).files
    building = out.with_name(out.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    (building / "annotations").mkdir(parents=True)
    for kind, seed in (("train", args.seed), ("val", args.seed + 1)):
        content = split(files, building / f"{kind}2017", seed)
        path = building / "annotations" / f"instances_{kind}2017.json"
        path.write_text(json.dumps(content))
    building.rename(out)
    print(f"{out}: {len(files)} photos, train and val, COCO layout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
