"""Which S3 client (issue 31): boto3, obstore and s3fs fetching the same objects from a
local S3 server (moto's, on 127.0.0.1), 8 threads, best of 3; and the time to list them.

Needs ``pip install 'moto[server]' boto3 obstore s3fs`` (only boto3 and moto are in the dev
extra). Usage::

    python benchmarks/s3_clients.py [PHOTOS_DIR]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from local_s3 import local_s3

BUCKET = "clients"


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/photos")
    with local_s3("test") as ep:
        run(root, ep)


def run(root: Path, ep: str) -> None:
    import boto3
    from botocore.config import Config

    c = boto3.client("s3", config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
    c.create_bucket(Bucket=BUCKET)
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))
    keys = []
    for p in files:
        k = "photos/" + p.relative_to(root).as_posix()
        c.put_object(Bucket=BUCKET, Key=k, Body=p.read_bytes())
        keys.append(k)
    nbytes = sum(p.stat().st_size for p in files)
    print(len(keys), "objects", round(nbytes / 1e6, 1), "MB")

    def bench(name: str, get: Callable[[str], bytes], threads: int = 8, reps: int = 3) -> None:
        best = 1e9
        for _ in range(reps):
            t = time.perf_counter()
            with ThreadPoolExecutor(threads) as ex:
                out = list(ex.map(get, keys))
            best = min(best, time.perf_counter() - t)
            assert sum(map(len, out)) == nbytes
        print(f"{name}: {len(keys) / best:.0f} objects/s, {nbytes / best / 1e6:.1f} MB/s")

    bench("local disk", lambda k: (root / k[len("photos/") :]).read_bytes())
    bench("boto3 get_object", lambda k: c.get_object(Bucket=BUCKET, Key=k)["Body"].read())
    import obstore
    from obstore.store import S3Store

    st = S3Store(
        BUCKET,
        endpoint=ep,
        client_options={"allow_http": True},
        virtual_hosted_style_request=False,
        region="us-east-1",
    )
    bench("obstore get", lambda k: bytes(obstore.get(st, k).bytes()))
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": ep})
    bench(f"s3fs {s3fs.__version__} cat", lambda k: fs.cat(f"{BUCKET}/{k}"))
    t = time.perf_counter()
    pages = c.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="photos/")
    n = sum(len(p.get("Contents", [])) for p in pages)
    print(f"boto3 list {n}: {time.perf_counter() - t:.3f} s")
    t = time.perf_counter()
    n = sum(len(b) for b in obstore.list(st, prefix="photos/"))
    print(f"obstore list {n}: {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
