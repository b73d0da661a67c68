"""Time to the first batch and peak memory on a large generated tree, per rank (issue 14).

Usage::

    python benchmarks/first_batch.py [--root DIR] [--n 1000000] [--world-size W --rank R]
                                     [--out first_batch.json] [--profile DIR]

(a) Generates ``--n`` small JPEG files (default 1,000,000) in 1000 class folders under
``--root`` (default ``$TMPDIR/dali_pipes_first_batch_<n>``; not committed): one 32x32
JPEG of textured noise is encoded once and the same bytes are written ``n`` times, so
generation costs file creation only. An existing tree with ``n`` files is reused. Each
file takes a filesystem block: about 4 GB of disk for 1,000,000 files.

(b) Starts each candidate in a fresh Python process, as one rank of ``--world-size``:

- ``dali_pipes``: ``DALIIterator(root, device="cpu", rank=R, world_size=W)`` (folder
  discovery, DistributedSampler plan, header checks, DALI pipeline), then ``next(iter())``;
- ``dali-reader``: DALI's ``fn.readers.file(file_root=root, shard_id=R, num_shards=W,
  random_shuffle=True)`` with the ResNet-50 example's operators and
  ``DALIClassificationIterator``, then ``next()``.

Both decode on the CPU with the same threads, batch size and 224 px random-resized crop +
flip. Each child reports: import time, construction time (the loader/iterator, which for
DALI's iterator includes building the pipeline and its first prefetch), the ``next()``
call, the total from the child's start to its first batch, and its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, after the first batch) with the peak
after the imports for reference. A Markdown table goes to stdout, everything to ``--out``.

``--profile DIR`` runs each child under ``python -m cProfile -o DIR/<candidate>.prof`` and
prints its top functions by cumulative time (read them again with ``python -m pstats``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

START = time.perf_counter()  # the child's start, before the heavy imports

CANDIDATES = ("dali_pipes", "dali-reader")
CLASSES = 1000
RESULT = "FIRST_BATCH_RESULT "


# --------------------------------------------------------------------------- the tree


def _jpeg_bytes(side: int = 32) -> bytes:
    """One small real JPEG: textured noise over a gradient, quality 90."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 200, side, dtype=np.float32)
    pixels = ramp[None, :, None] + ramp[:, None, None] * 0.5 + rng.normal(0, 25, (side, side, 3))
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


def _count(root: Path) -> int:
    total = 0
    with os.scandir(root) as classes:
        for entry in classes:
            if entry.is_dir():
                with os.scandir(entry.path) as files:
                    total += sum(1 for _ in files)
    return total


def generate(root: Path, n: int, classes: int = CLASSES) -> float:
    """Write ``n`` copies of one JPEG into ``classes`` folders; seconds taken (0: reused)."""
    if root.is_dir() and _count(root) == n:
        return 0.0
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"{root} exists with another number of files than {n}; remove it first")
    start = time.perf_counter()
    blob = _jpeg_bytes()
    per, extra = divmod(n, classes)

    def write_class(c: int) -> None:
        folder = root / f"c{c:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        first = c * per + min(c, extra)
        for i in range(first, first + per + (c < extra)):
            fd = os.open(folder / f"img_{i:07d}.jpg", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, blob)
            finally:
                os.close(fd)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write_class, range(classes)))
    return time.perf_counter() - start


# --------------------------------------------------------------------------- children


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _child_dali_pipes(args: argparse.Namespace) -> tuple[Any, Any]:
    from dali_pipes import DALIIterator

    loader = DALIIterator(
        args.root,
        batch_size=args.batch,
        device="cpu",
        num_threads=args.threads,
        rank=args.rank,
        world_size=args.world_size,
    )
    return loader, lambda: next(iter(loader))


def _child_dali_reader(args: argparse.Namespace) -> tuple[Any, Any]:
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

    @pipeline_def
    def example() -> tuple[Any, Any]:
        jpegs, labels = fn.readers.file(
            file_root=args.root,
            shard_id=args.rank,
            num_shards=args.world_size,
            random_shuffle=True,
            pad_last_batch=True,
            name="Reader",
        )
        images = fn.decoders.image_random_crop(
            jpegs,
            device="cpu",
            output_type=types.RGB,
            random_area=[0.08, 1.0],
            random_aspect_ratio=[3 / 4, 4 / 3],
            num_attempts=100,
        )
        images = fn.resize(images, resize_x=224, resize_y=224, interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT,
            output_layout="CHW",
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
            mirror=fn.random.coin_flip(probability=0.5),
        )
        return images, labels

    pipe = example(
        batch_size=args.batch,
        num_threads=args.threads,
        device_id=None,
        prefetch_queue_depth=2,
        seed=0,
    )
    pipe.build()
    loader = DALIClassificationIterator(
        pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL
    )

    def first() -> tuple[Any, Any]:
        batch = next(loader)[0]
        return batch["data"], batch["label"].squeeze(-1).long()

    return loader, first


def child(args: argparse.Namespace) -> None:
    """One candidate, in this fresh process: prints its figures as one JSON line."""
    import torch  # noqa: F401 - both candidates hand over torch tensors
    from nvidia.dali import fn  # noqa: F401
    from nvidia.dali.plugin import pytorch  # noqa: F401

    if args.child == "dali_pipes":
        import dali_pipes.iterator  # noqa: F401

    imported = time.perf_counter()
    import_mb = _peak_mb()
    make = _child_dali_pipes if args.child == "dali_pipes" else _child_dali_reader
    loader, first = make(args)
    built = time.perf_counter()
    images, _ = first()
    done = time.perf_counter()
    result = {
        "candidate": args.child,
        "import_s": imported - START,
        "construct_s": built - imported,
        "next_s": done - built,
        "to_first_batch_s": done - START,
        "after_imports_s": done - imported,
        "peak_rss_mb": _peak_mb(),
        "peak_rss_after_imports_mb": import_mb,
        "batch_shape": list(images.shape),
        "batches_per_rank": len(loader),
    }
    print(RESULT + json.dumps(result), flush=True)


def run_child(args: argparse.Namespace, name: str) -> dict[str, Any]:
    cmd = [sys.executable]
    prof = None
    if args.profile:
        prof = Path(args.profile) / f"{name}.prof"
        prof.parent.mkdir(parents=True, exist_ok=True)
        cmd += ["-m", "cProfile", "-o", str(prof)]
    cmd += [
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--root",
        str(args.root),
        "--batch",
        str(args.batch),
        "--threads",
        str(args.threads),
        "--world-size",
        str(args.world_size),
        "--rank",
        str(args.rank),
    ]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT)]
    if not lines:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT) :])
    result["spawn_to_exit_s"] = wall
    if prof is not None:
        result["profile"] = str(prof)
    return result


def _top(prof: str, count: int = 25) -> None:
    print(f"\n{prof}: top {count} by cumulative time")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(count)


# --------------------------------------------------------------------------- report

COLUMNS = (
    ("loader", "candidate", "{}"),
    ("imports s", "import_s", "{:.2f}"),
    ("construct s", "construct_s", "{:.2f}"),
    ("next() s", "next_s", "{:.2f}"),
    ("first batch after imports s", "after_imports_s", "{:.2f}"),
    ("start to first batch s", "to_first_batch_s", "{:.2f}"),
    ("peak RSS MB", "peak_rss_mb", "{:.0f}"),
    ("RSS after imports MB", "peak_rss_after_imports_mb", "{:.0f}"),
)


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(title for title, _, _ in COLUMNS) + " |",
        "| --- |" + " ---: |" * (len(COLUMNS) - 1),
    ]
    for row in rows:
        lines.append("| " + " | ".join(fmt.format(row[key]) for _, key, fmt in COLUMNS) + " |")
    return "\n".join(lines)


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for module in ("torch", "nvidia.dali"):
        try:
            versions[module] = __import__(module, fromlist=["__version__"]).__version__
        except ImportError:
            versions[module] = None
    return versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None, help="the generated tree")
    parser.add_argument("--n", type=int, default=1_000_000, help="files in the tree")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="default: the CPU cores")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=list(CANDIDATES))
    parser.add_argument("--out", type=Path, default=Path("outputs/first_batch.json"))
    parser.add_argument("--profile", default=None, help="cProfile each child into this dir")
    parser.add_argument("--child", choices=CANDIDATES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads is None:
        args.threads = len(os.sched_getaffinity(0))
    if args.child:
        child(args)
        return
    if not 0 <= args.rank < args.world_size:
        parser.error(f"--rank {args.rank} must be in [0, --world-size {args.world_size})")
    if args.root is None:
        args.root = Path(tempfile.gettempdir()) / f"dali_pipes_first_batch_{args.n}"
    print(f"tree: {args.root} ({args.n} files, {CLASSES} classes)", flush=True)
    generated = generate(args.root, args.n)
    print(f"generated in {generated:.1f} s" if generated else "reused the existing tree")

    rows = []
    for name in args.candidates:
        print(f"measuring {name} (fresh process) ...", flush=True)
        rows.append(run_child(args, name))
    print()
    print(markdown(rows))
    if args.profile:
        for row in rows:
            _top(row["profile"])
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cores": len(os.sched_getaffinity(0))},
        "versions": _versions(),
        "command": " ".join(["python", *sys.argv]),
        "tree": {"root": str(args.root), "files": args.n, "classes": CLASSES},
        "generate_s": generated,
        "batch_size": args.batch,
        "threads": args.threads,
        "world_size": args.world_size,
        "rank": args.rank,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
