"""An ImageNet-like copy of real photos, so GPU figures compare with published ImageNet ones.

Usage::

    python benchmarks/imagenet_like.py SRC OUT [--copies 48] [--quality 90] [--workers N]
                                       [--stats FILE]

Why: decode cost scales with pixels and file size, and the photos in ``../shared/data``
are 2-6x larger than ImageNet's (0.4-2.3 MP, 164 KB on average). A loader measured on them
is not comparable with the ImageNet figures NVIDIA and others publish (issue 16).

What it writes, in ImageNet's layout (``data=imagenet data.root=OUT`` reads it):

- ``OUT/train/<class>/<stem>_c<k>.JPEG`` for k < ``--copies``: every photo of ``SRC``'s
  ImageFolder tree (``SRC/<class>/**/<image>``, listed as the loaders list it), repeated
  so an epoch holds several thousand images (213 photos x 48 = 10,224);
- ``OUT/val/<class>/<stem>.JPEG``: each photo once.

Each photo is resized once, as ImageNet's files were by the photo sites they came from:
the longer side to 500 px, unless that would make the shorter side less than 333 px; then
the shorter side to 333 px (so shorter sides fall in 333-500 px; a 4:3 photo becomes
500 x 375, a 3:2 one 500 x 333, a 16:9 one 592 x 333; smaller photos are enlarged), with
Pillow's antialiased Lanczos filter. EXIF orientation and colour profiles are dropped
(ImageNet's loaders ignore both). It is encoded baseline
(not progressive), JPEG quality ``--quality`` (default 90) with 4:2:0 chroma subsampling;
greyscale photos stay greyscale (one channel, as ImageNet's few greyscale files), any other
mode becomes RGB. The copies of a photo are byte-identical files, not links. Output is a
pure function of the inputs: the same SRC gives the same bytes.

The tree is built beside ``OUT`` and renamed into place at the end, so an interrupted or
failed run leaves nothing at ``OUT``; an existing ``OUT`` is refused, never overwritten.
The statistics (counts, sizes, bytes, subsampling) are printed as a table and, with
``--stats``, written as JSON.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import shutil
import statistics
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from PIL import Image, JpegImagePlugin

from dali_pipes.data.sources import discover_folder
from dali_pipes.errors import DaliPipesError

LONGER = 500  # ImageNet's photos were mostly fetched at 500 px on the longer side
SHORTER = 333  # ... and their shorter side at 333-500 px (500 x 333 is 3:2)
SUBSAMPLING = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0", -1: "greyscale"}


@dataclass(frozen=True)
class Encoded:
    """One photo after resizing and encoding: where it came from and what it became."""

    source: str
    name: str  # <class>/<stem>, without the extension
    width: int
    height: int
    source_width: int
    source_height: int
    subsampling: str
    progressive: bool
    data: bytes


def target_size(width: int, height: int) -> tuple[int, int]:
    """ImageNet's size for a ``width`` x ``height`` photo: longer side 500 px, unless the
    shorter side would fall below 333 px; then shorter side 333 px (aspect kept)."""
    longer, shorter = max(width, height), min(width, height)
    new_longer, new_shorter = LONGER, round(shorter * LONGER / longer)
    if new_shorter < SHORTER:
        new_longer, new_shorter = round(longer * SHORTER / shorter), SHORTER
    return (new_longer, new_shorter) if width >= height else (new_shorter, new_longer)


def encode(source: str, name: str, quality: int) -> Encoded:
    """Resize and re-encode one photo (runs in a worker process)."""
    try:
        with Image.open(source) as im:
            im.load()
            source_size = im.size
            image = im.convert("L" if im.mode in ("L", "LA", "I;16") else "RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise DaliPipesError(f"{source}: Pillow cannot decode it ({exc}); remove it") from exc
    size = target_size(*source_size)
    if size != image.size:
        image = image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality, subsampling="4:2:0", progressive=False)
    data = buffer.getvalue()
    with Image.open(io.BytesIO(data)) as check:
        sampling = JpegImagePlugin.get_sampling(check)
        progressive = bool(check.info.get("progressive", False))
    return Encoded(source, name, *size, *source_size, SUBSAMPLING[sampling], progressive, data)


def _summary(values: list[int]) -> dict[str, float]:
    return {
        "min": min(values),
        "median": statistics.median(values),
        "mean": round(statistics.fmean(values), 1),
        "max": max(values),
    }


def statistics_of(photos: list[Encoded], copies: int) -> dict[str, Any]:
    """What one epoch of the train split holds (every photo ``copies`` times)."""
    shorter = [min(p.width, p.height) for p in photos]
    longer = [max(p.width, p.height) for p in photos]
    pixels = [p.width * p.height for p in photos]
    sizes = [len(p.data) for p in photos]
    return {
        "train_images": len(photos) * copies,
        "val_images": len(photos),
        "distinct_photos": len(photos),
        "copies": copies,
        "classes": len({p.name.split("/", 1)[0] for p in photos}),
        "shorter_side_px": _summary(shorter),
        "longer_side_px": _summary(longer),
        "megapixels": {k: round(v / 1e6, 3) for k, v in _summary(pixels).items()},
        "file_kb": {k: round(v / 1000, 1) for k, v in _summary(sizes).items()},
        "train_gb": round(sum(sizes) * copies / 1e9, 3),
        "subsampling": dict(Counter(p.subsampling for p in photos)),
        "progressive": sum(p.progressive for p in photos),
        "enlarged": sum(p.width * p.height > p.source_width * p.source_height for p in photos),
    }


def _table(stats: dict[str, Any]) -> str:
    rows = [
        ("images (train, one epoch)", f"{stats['train_images']:,}"),
        ("images (val)", f"{stats['val_images']:,}"),
        ("distinct photos x copies", f"{stats['distinct_photos']} x {stats['copies']}"),
        ("classes", stats["classes"]),
    ]
    for label, key, unit in (
        ("shorter side", "shorter_side_px", "px"),
        ("longer side", "longer_side_px", "px"),
        ("megapixels", "megapixels", "MP"),
        ("file size", "file_kb", "KB"),
    ):
        s = stats[key]
        summary = f"{s['min']}-{s['max']} {unit} (median {s['median']}, mean {s['mean']})"
        rows.append((label, summary))
    rows += [
        ("train split on disk", f"{stats['train_gb']} GB"),
        ("chroma subsampling", ", ".join(f"{k}: {v}" for k, v in stats["subsampling"].items())),
        ("progressive", stats["progressive"]),
        ("enlarged (the photo was smaller)", stats["enlarged"]),
    ]
    return "\n".join(["| | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows)])


def build(src: Path, out: Path, copies: int, quality: int, workers: int) -> list[Encoded]:
    """Write the tree at ``out`` (built beside it, renamed into place when complete)."""
    if copies < 1 or not 1 <= quality <= 100:
        raise DaliPipesError(f"--copies {copies} / --quality {quality}: need >= 1 / 1-100")
    if out.exists():
        raise DaliPipesError(f"{out} already exists; remove it or choose another OUT")
    if not out.parent.is_dir():
        raise DaliPipesError(f"{out.parent} is not a directory; create it first")
    listing = discover_folder(src)
    top = Path(listing.root).expanduser()
    names = []
    for path in listing.files:
        rel = Path(path).relative_to(top)
        names.append(f"{rel.parts[0]}/{'_'.join(rel.with_suffix('').parts[1:])}")
    if len(set(names)) != len(names):
        raise DaliPipesError(f"{src}: two photos of a class share a name; rename one")
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            photos = list(
                pool.map(encode, listing.files, names, [quality] * len(names), chunksize=4)
            )
        for photo in photos:
            label, stem = photo.name.split("/", 1)
            (partial / "val" / label).mkdir(parents=True, exist_ok=True)
            (partial / "train" / label).mkdir(parents=True, exist_ok=True)
            first = partial / "val" / label / f"{stem}.JPEG"
            first.write_bytes(photo.data)
            for k in range(copies):
                shutil.copyfile(first, partial / "train" / label / f"{stem}_c{k}.JPEG")
        partial.rename(out)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return photos


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("src", type=Path, help="an ImageFolder tree of JPEG photos")
    parser.add_argument("out", type=Path, help="where the ImageNet-like tree goes (new)")
    parser.add_argument("--copies", type=int, default=48, help="train copies of each photo")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality (IJG scale)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--stats", type=Path, help="also write the statistics here (JSON)")
    args = parser.parse_args(argv)
    photos = build(args.src, args.out, args.copies, args.quality, args.workers)
    stats = statistics_of(photos, args.copies)
    record = {
        "command": " ".join(["python", "benchmarks/imagenet_like.py", *(argv or sys.argv[1:])]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "pillow": Image.__version__,
        "quality": args.quality,
        "statistics": stats,
        "photos": [
            {k: v for k, v in asdict(p).items() if k != "data"} | {"bytes": len(p.data)}
            for p in photos
        ],
    }
    print(_table(stats))
    if args.stats:
        args.stats.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    try:
        main()
    except DaliPipesError as exc:
        raise SystemExit(f"imagenet_like: {exc}") from None
