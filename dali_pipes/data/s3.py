"""S3-compatible object storage (AWS S3, MinIO, Ceph, R2, ...) through boto3.

Credentials, region and endpoint come from the standard AWS variables and files
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``AWS_REGION`` or
``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``), read by boto3 itself: nothing is written
into a config or a log. With an endpoint set (a local MinIO), requests use path-style
addressing, as every S3 tool does for such servers. boto3 was chosen by measurement
(benchmarks/RESULTS.md, "S3 clients").

Faults: a connection reset, a 5xx, a throttling reply or a timeout is retried by botocore's
``standard`` retry mode with exponential backoff (``AWS_MAX_ATTEMPTS`` attempts, 10 unless
set), and each read also keeps ``data.read_timeout``; a missing bucket, bad credentials or
a refused request is one line naming the URL and what to do; an object that is gone is a
bad file (``data.on_error``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.errors import DataError
from dali_pipes.image.decode import Blob
from dali_pipes.image.reads import read_all

#: The URL scheme of S3-compatible object storage (AWS S3, MinIO, Ceph, R2, ...).
S3_SCHEME = "s3://"
#: Objects of one batch fetched at once (each with its own deadline).
READ_THREADS = 16
#: Attempts of a request (first try included) unless ``AWS_MAX_ATTEMPTS`` says otherwise.
DEFAULT_ATTEMPTS = 10
_MISSING = ("NoSuchKey", "404", "NotFound")
_THROTTLED = ("SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "503")
_CREDENTIALS = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken")

_clients: dict[int, Any] = {}  # one client and one thread pool per process (fork-safe)
_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` as ``(bucket, prefix)``, the prefix without slashes at its ends."""
    if not url.startswith(S3_SCHEME) or not url[len(S3_SCHEME) :].split("/")[0]:
        raise DataError(f"{url} is not an S3 URL; write s3://bucket/prefix")
    bucket, _, prefix = url[len(S3_SCHEME) :].partition("/")
    return bucket, prefix.strip("/")


def client() -> Any:
    """This process's boto3 S3 client (thread-safe; made after a fork, never inherited)."""
    pid = os.getpid()
    with _lock:
        if pid not in _clients:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as exc:
                raise DataError(
                    f"reading s3:// needs boto3 ({exc}); pip install 'dali-pipes[s3]'"
                ) from None
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            retries: dict[str, Any] = {"mode": os.environ.get("AWS_RETRY_MODE", "standard")}
            retries["max_attempts"] = int(os.environ.get("AWS_MAX_ATTEMPTS", DEFAULT_ATTEMPTS))
            config = Config(
                retries=retries,
                connect_timeout=5,
                read_timeout=30,
                max_pool_connections=2 * READ_THREADS,
                s3={"addressing_style": "path" if endpoint else "auto"},
            )
            region = os.environ.get("AWS_REGION")
            _clients[pid] = boto3.session.Session().client(
                "s3", region_name=region or None, config=config
            )
        return _clients[pid]


def _pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _lock:
        if pid not in _pools:
            _pools[pid] = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="dali-pipes-s3")
        return _pools[pid]


def failure(url: str, exc: Exception) -> DataError:
    """The one-line error for a request on ``url`` that failed for good, saying what to do."""
    from botocore.exceptions import ClientError, NoCredentialsError

    where = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS"
    if isinstance(exc, NoCredentialsError):
        return DataError(
            f"{url}: no AWS credentials found; set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        )
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code == "NoSuchBucket":
            bucket = split_url(url)[0]
            return DataError(
                f"{url}: bucket {bucket} does not exist at {where}; check data.root "
                "(and AWS_ENDPOINT_URL)"
            )
        if code in _CREDENTIALS:
            return DataError(
                f"{url}: the credentials were rejected ({code}); check AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
            )
        if code in ("AccessDenied", "403", "AllAccessDisabled"):
            return DataError(
                f"{url}: access denied ({code}); grant these credentials s3:ListBucket and "
                "s3:GetObject on it, or use other credentials"
            )
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if status >= 500 or code in _THROTTLED:
            return DataError(
                f"{url}: the server still answers {code or status} after retries with "
                "backoff; rerun later, or raise AWS_MAX_ATTEMPTS"
            )
        return DataError(f"{url}: the request was refused ({code}: {exc}); check the URL")
    return DataError(
        f"{url}: no answer from {where} after retries ({type(exc).__name__}: {exc}); "
        "check AWS_ENDPOINT_URL and the network, then rerun"
    )


def list_keys(url: str) -> list[str]:
    """Every object key under ``url`` (paginated, in the server's key order), or one line
    saying why the bucket cannot be listed."""
    bucket, prefix = split_url(url)
    keys: list[str] = []
    try:
        pages = (
            client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else "")
        )
        for page in pages:
            keys.extend(item["Key"] for item in page.get("Contents", ()))
    except DataError:
        raise
    except Exception as exc:
        raise failure(url, exc) from None
    return keys


@dataclass(frozen=True)
class S3Storage:
    """Objects in S3-compatible storage, named ``s3://bucket/key``; a batch's objects are
    fetched concurrently, each within the read deadline."""

    def read(self, url: str) -> Blob:
        """One object's bytes; an object that is gone is a bad file, other failures raise."""
        from botocore.exceptions import ClientError, IncompleteReadError, ResponseStreamingError

        bucket, key = split_url(url)
        for attempt in range(3):  # the body can break after the request succeeded
            try:
                body = client().get_object(Bucket=bucket, Key=key)["Body"]
                return np.frombuffer(body.read(), dtype=np.uint8)
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code in _MISSING:
                    return DataError(f"{url}: the object is gone ({code}); restore it or remove it")
                raise failure(url, exc) from None
            except (IncompleteReadError, ResponseStreamingError) as exc:
                if attempt == 2:
                    raise failure(url, exc) from None
            except Exception as exc:
                raise failure(url, exc) from None
        raise AssertionError("unreachable")

    def read_many(self, paths: Sequence[str], timeout: float | None) -> list[Blob]:
        """The objects' bytes, fetched on this process's thread pool, each within ``timeout``."""
        futures = [_pool().submit(read_all, self.read, [p], timeout) for p in paths]
        return [f.result()[0] for f in futures]


def forget_clients() -> None:
    """Drop this process's cached client, so the next request reads the AWS variables
    again (after they changed, as when a test points the process at another server)."""
    with _lock:
        _clients.clear()
