"""moto's standalone S3 server on a free port of 127.0.0.1 for the benchmark scripts, with
the AWS variables dali_pipes' S3 storage reads pointed at it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def local_s3(key: str = "bench") -> Iterator[str]:
    """Start the server, set ``AWS_ENDPOINT_URL`` and test credentials, yield the
    endpoint; stop the server afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update(
            AWS_ENDPOINT_URL=endpoint,
            AWS_ACCESS_KEY_ID=key,
            AWS_SECRET_ACCESS_KEY=key,
            AWS_DEFAULT_REGION="us-east-1",
        )
        yield endpoint
    finally:
        proc.terminate()
        proc.wait()
