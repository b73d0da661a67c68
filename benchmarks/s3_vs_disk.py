"""Images/s from a local S3 server against the same files on local disk, as a folder
(data=folder) and packed (data=shards).

Starts moto's S3 server (``pip install 'moto[server]'``, in the dev extra) on 127.0.0.1,
puts the photos and their pack (``python -m dali_pipes.pack``, 8 MB shards) in a bucket,
and times whole training epochs of the torch and DALI CPU backends over ``s3://`` and
over the local copies, after one warm-up epoch each; writes the figures as JSON. Usage::

    python benchmarks/s3_vs_disk.py [PHOTOS_DIR] [OUT.json]
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
from botocore.config import Config
from local_s3 import local_s3

from dali_pipes import build_loader, compose_config
from dali_pipes.tools.pack import run_pack


def epoch_rate(kind: str, data: str, root: str, epochs: int = 2) -> float:
    """Images/s over ``epochs`` timed epochs after a warm-up one."""
    backend, _, _ = kind.partition("-")
    overrides = [
        f"data={data}",
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
        packed = Path(tempfile.mkdtemp(prefix="s3-vs-disk-")) / "packed"
        run_pack(
            compose_config(
                ["data=folder", f"data.root={photos}", f"out={packed}", "pack.shard_size_mb=8"],
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
                    rows[name] = round(epoch_rate(kind, data, root), 1)
                    print(f"{name:22s} {rows[name]:8.1f} images/s", flush=True)
    record = {
        "images_per_s": rows,
        "files": len(files),
        "photos": str(photos),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "server": "moto_server (127.0.0.1)",
        "shards": "pack.shard_size_mb=8, data.shuffle_buffer=2048, data.block_mb=8",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "command": " ".join(sys.argv),
    }
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
