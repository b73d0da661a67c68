"""Images/s from a local S3 server against the same files on local disk, as a folder
(data=folder) and packed (data=shards).

Starts moto's S3 server (``pip install 'moto[server]'``, in the dev extra) on 127.0.0.1,
puts the photos and their pack (``python -m dali_pipes.pack``, 8 MB shards) in a bucket,
and times whole training epochs of the torch and DALI CPU backends over ``s3://`` and
over the local copies, after one warm-up epoch each; writes the figures as JSON. Usage::

    python benchmarks/s3_vs_disk.py [PHOTOS_DIR] [OUT.json] [--shard-mb 8] [--epochs 2]

A dataset smaller than the shard reader's block cache (two shuffle windows) is read from
the bucket once, in the warm-up epoch: time a larger one (``imagenet_like.py``'s train
split) to see the steady state of reading shards from the bucket.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import boto3
from botocore.config import Config
from local_s3 import local_s3

from dali_pipes import build_loader, compose_config
from dali_pipes.tools import provenance
from dali_pipes.tools.pack import run_pack


def epoch_rate(
    kind: str, data: str, root: str, epochs: int = 2, batch_size: int = 32, *extra: str
) -> float:
    """Images/s over ``epochs`` timed epochs after a warm-up one (``extra``: overrides)."""
    backend, _, _ = kind.partition("-")
    overrides = [
        f"data={data}",
        f"data.root={root}",
        f"data.batch_size={batch_size}",
        f"backend={backend}",
        "backend.device=cpu",
        "augment=imagenet",
        *extra,
    ]
    with build_loader(compose_config(overrides), "train") as loader:
        for _ in loader:
            pass
        n, start = 0, time.perf_counter()
        for epoch in range(1, epochs + 1):
            loader.set_epoch(epoch)
            n += sum(len(labels) for _, labels in loader)
        return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", nargs="?", type=Path, default=Path("/work/shared/data/photos"))
    parser.add_argument("out", nargs="?", type=Path, default=Path("benchmarks/s3-vs-disk.json"))
    parser.add_argument("--shard-mb", type=float, default=8.0)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after a warm-up")
    args = parser.parse_args()
    photos, out = args.photos, args.out
    with local_s3():
        client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
        client.create_bucket(Bucket="bench")
        packed = Path(tempfile.mkdtemp(prefix="s3-vs-disk-")) / "packed"
        run_pack(
            compose_config(
                [
                    "data=folder",
                    f"data.root={photos}",
                    f"out={packed}",
                    f"pack.shard_size_mb={args.shard_mb:g}",
                ],
                config_name="pack",
            )
        )
        files = sorted(p for p in photos.rglob("*") if p.is_file())
        for folder, prefix in ((photos, "photos"), (packed, "packed")):
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                key = f"{prefix}/{path.relative_to(folder).as_posix()}"
                client.put_object(Bucket="bench", Key=key, Body=path.read_bytes())
        rows = {}
        for data, local, url in (
            ("folder", str(photos), "s3://bench/photos"),
            ("shards", str(packed), "s3://bench/packed"),
        ):
            for kind in ("torch", "dali-cpu"):
                for where, root in (("disk", local), ("s3", url)):
                    name = f"{data} {kind} {where}"
                    rows[name] = round(epoch_rate(kind, data, root, args.epochs), 1)
                    print(f"{name:22s} {rows[name]:8.1f} images/s", flush=True)
    record = {
        "images_per_s": rows,
        "files": len(files),
        "photos": str(photos),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "server": "moto_server (127.0.0.1)",
        "shards": f"pack.shard_size_mb={args.shard_mb:g}, data.shuffle_buffer=2048, "
        "data.block_mb=8",
        "data_bytes": sum(p.stat().st_size for p in files),
        "epochs": f"{args.epochs} timed after a warm-up one",
        "commit": provenance.commit(),
        "command": "python " + " ".join(sys.argv),
    }
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
