"""Images/s of data=folder from a local S3 server against the same files on local disk.

Starts moto's S3 server (``pip install 'moto[server]'``, in the dev extra) on 127.0.0.1,
puts the photos in a bucket, and times whole training epochs of the torch and DALI CPU
backends over ``s3://`` and over the local folder, after one warm-up epoch each; writes
the figures as JSON. Usage::

    python benchmarks/s3_vs_disk.py [PHOTOS_DIR] [OUT.json]
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config
from local_s3 import local_s3

from dali_pipes import build_loader, compose_config


def epoch_rate(kind: str, root: str, epochs: int = 2) -> float:
    """Images/s over ``epochs`` timed epochs after a warm-up one."""
    backend, _, _ = kind.partition("-")
    overrides = [
        "data=folder",
        f"data.root={root}",
        "data.batch_size=32",
        f"backend={backend}",
        "backend.device=cpu",
        "augment=imagenet",
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
    photos = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/photos")
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "benchmarks/s3-vs-disk.json")
    with local_s3():
        client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
        client.create_bucket(Bucket="bench")
        files = sorted(p for p in photos.rglob("*") if p.is_file())
        for path in files:
            client.put_object(
                Bucket="bench",
                Key=f"photos/{path.relative_to(photos).as_posix()}",
                Body=path.read_bytes(),
            )
        rows = {}
        for kind in ("torch", "dali-cpu"):
            for where, root in (("disk", str(photos)), ("s3", "s3://bench/photos")):
                rows[f"{kind} {where}"] = round(epoch_rate(kind, root), 1)
                print(f"{kind:9s} {where:5s} {rows[f'{kind} {where}']:8.1f} images/s", flush=True)
    record = {
        "images_per_s": rows,
        "files": len(files),
        "photos": str(photos),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "server": "moto_server (127.0.0.1)",
        "command": " ".join(sys.argv),
    }
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
