"""Time to the first batch from a bucket of many objects (issue 31): the paginated listing
dominates it, so the objects are one small real photo's bytes under ``--classes`` class
prefixes (an ImageNet-like layout), put into moto's S3 server on 127.0.0.1.

Usage::

    python benchmarks/s3_first_batch.py [--n 100000] [--classes 1000] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from botocore.config import Config
from local_s3 import local_s3

from dali_pipes import build_loader, compose_config
from dali_pipes.data.s3 import list_keys

PHOTO = Path("/work/shared/data/photos/pixabay_640/crab-1990198_640.jpg")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--photo", type=Path, default=PHOTO)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/s3-first-batch.json"))
    args = ap.parse_args()
    with local_s3():
        client = boto3.client(
            "s3", config=Config(s3={"addressing_style": "path"}, max_pool_connections=16)
        )
        client.create_bucket(Bucket="many")
        body = args.photo.read_bytes()
        per = args.n // args.classes

        def put(i: int) -> None:
            key = f"imagenet/train/n{i // per:08d}/img_{i % per:05d}.jpg"
            client.put_object(Bucket="many", Key=key, Body=body)

        start = time.perf_counter()
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(put, range(per * args.classes)))
        upload_s = time.perf_counter() - start
        print(f"put {per * args.classes} objects in {upload_s:.0f} s", flush=True)
        start = time.perf_counter()
        keys = len(list_keys("s3://many/imagenet/train"))
        list_s = time.perf_counter() - start
        print(f"listing {keys} keys: {list_s:.1f} s", flush=True)
        rows = {}
        for backend in ("torch", "dali"):
            start = time.perf_counter()
            cfg = compose_config(
                [
                    "data=folder",
                    "data.root=s3://many/imagenet/train",
                    "data.batch_size=64",
                    f"backend={backend}",
                    "backend.device=cpu",
                ]
            )
            with build_loader(cfg, "train") as loader:
                built = time.perf_counter() - start
                next(iter(loader))
                first = time.perf_counter() - start
            rows[backend] = {"construction_s": round(built, 1), "first_batch_s": round(first, 1)}
            print(backend, rows[backend], flush=True)
    record = {
        "objects": keys,
        "classes": args.classes,
        "listing_s": round(list_s, 1),
        "put_s": round(upload_s, 1),
        "loaders": rows,
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "server": "moto_server (127.0.0.1)",
        "command": " ".join(sys.argv),
    }
    args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
