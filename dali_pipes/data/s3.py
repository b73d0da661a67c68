"""S3-compatible object storage (AWS S3, MinIO, Ceph, R2, ...) through boto3.

Credentials, region and endpoint come from the standard AWS variables and files
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``AWS_REGION`` or
``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``), read by boto3 itself: nothing is written
into a config or a log. With an endpoint set (a local MinIO), requests use path-style
addressing, as every S3 tool does for such servers. boto3 was chosen by measurement
(benchmarks/RESULTS.md, "S3 clients").

Writes (``pack out=s3://...``) are one PUT per object with its MD5, so an object appears
whole or not at all. Shards are read in ranged GETs (:mod:`dali_pipes.data.shard_reader`).

Faults: a connection reset, a 5xx, a throttling reply or a timeout is retried by botocore's
``standard`` retry mode with exponential backoff (``AWS_MAX_ATTEMPTS`` attempts, 10 unless
set), and each read also keeps ``data.read_timeout``: a request that gets no byte for a
quarter of it (at most :data:`MAX_REQUEST_TIMEOUT`) is abandoned and sent again, so a
stalled connection is retried well within the read's deadline, and a reply whose body
stops or breaks is asked for again. A missing bucket, bad credentials or a refused request
is one line naming the URL and what to do; an object that is gone is a bad file
(``data.on_error``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import numpy as np

from dali_pipes.data.files import WriteError
from dali_pipes.errors import DataError
from dali_pipes.image.decode import Blob
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT, read_all

#: The URL scheme of S3-compatible object storage (AWS S3, MinIO, Ceph, R2, ...).
S3_SCHEME = "s3://"
#: Objects of one batch fetched at once (each with its own deadline).
READ_THREADS = 16
#: Attempts of a request (first try included) unless ``AWS_MAX_ATTEMPTS`` says otherwise.
DEFAULT_ATTEMPTS = 10
#: A request's connect and read timeout (seconds without a byte) at most; reads take a
#: quarter of ``data.read_timeout`` when that is less (:func:`request_timeout`).
MAX_REQUEST_TIMEOUT = 30.0
#: Tries of a reply's body that broke or stopped after its head arrived.
BODY_ATTEMPTS = 3
#: The largest object one PUT may write (S3's limit; bigger ones need a multipart upload).
MAX_PUT = 5 * 2**30
_MISSING = ("NoSuchKey", "404", "NotFound")
_THROTTLED = ("SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "503")
_CREDENTIALS = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken")

# This process's clients (one per request timeout) and thread pool; a forked child starts
# without them (_after_fork_in_child).
_clients: dict[float, Any] = {}
_pools: list[ThreadPoolExecutor] = []
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked process (a DataLoader worker) starts with a fresh lock and no clients or
    pools: a parent thread may have held the lock at the fork (building a client, taking
    the pool), and it would then stay held in the child for ever."""
    global _lock
    _lock = threading.Lock()
    _clients.clear()
    _pools.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` as ``(bucket, prefix)``, the prefix without slashes at its ends."""
    if not url.startswith(S3_SCHEME) or not url[len(S3_SCHEME) :].split("/")[0]:
        raise DataError(f"{url} is not an S3 URL; write s3://bucket/prefix")
    bucket, _, prefix = url[len(S3_SCHEME) :].partition("/")
    return bucket, prefix.strip("/")


def request_timeout(read_timeout: float | None) -> float:
    """The connect and read timeout of one request under ``data.read_timeout``: a quarter
    of it, so that a request that stalls is abandoned and retried (with backoff) while the
    read's deadline still has room, and at most :data:`MAX_REQUEST_TIMEOUT`."""
    if read_timeout is None:
        return MAX_REQUEST_TIMEOUT
    return min(MAX_REQUEST_TIMEOUT, read_timeout / 4)


def client(timeout: float = MAX_REQUEST_TIMEOUT) -> Any:
    """This process's boto3 S3 client whose requests time out after ``timeout`` seconds
    without a byte (thread-safe; made after a fork, never inherited)."""
    with _lock:
        if timeout not in _clients:
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
                connect_timeout=min(5.0, timeout),
                read_timeout=timeout,
                max_pool_connections=2 * READ_THREADS,
                s3={"addressing_style": "path" if endpoint else "auto"},
            )
            region = os.environ.get("AWS_REGION")
            _clients[timeout] = boto3.session.Session().client(
                "s3", region_name=region or None, config=config
            )
        return _clients[timeout]


def _pool() -> ThreadPoolExecutor:
    with _lock:
        if not _pools:
            _pools.append(ThreadPoolExecutor(READ_THREADS, thread_name_prefix="dali-pipes-s3"))
        return _pools[0]


def failure(url: str, exc: Exception, needs: str = "s3:ListBucket and s3:GetObject") -> DataError:
    """The one-line error for a request on ``url`` that failed for good, saying what to do
    (``needs``: the permissions the request takes, for an access-denied reply). The
    client's own text is folded onto the line, and the user and password of an endpoint
    written ``http://user:password@host`` are left out of it."""
    return DataError(_USERINFO.sub("//", " ".join(str(_failure(url, exc, needs)).split())))


#: The ``user:password@`` of a URL.
_USERINFO = re.compile(r"//[^/@\s]*@")


def _failure(url: str, exc: Exception, needs: str) -> DataError:
    from botocore.exceptions import ClientError, NoCredentialsError, ParamValidationError

    where = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS"
    if isinstance(exc, ParamValidationError):
        return DataError(
            f"{url}: not a valid S3 request ({exc}); check the bucket name and key in the URL"
        )
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
                f"{url}: access denied ({code}); grant these credentials {needs} on it, "
                "or use other credentials"
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


def list_objects(url: str, *, recursive: bool = True) -> list[dict[str, Any]]:
    """Every object under ``url`` (``Key``, ``Size``, ``ETag``; paginated, in the server's
    key order; only those directly under it unless ``recursive``), or one line saying why
    the bucket cannot be listed."""
    bucket, prefix = split_url(url)
    found: list[dict[str, Any]] = []
    try:
        pages = (
            client()
            .get_paginator("list_objects_v2")
            .paginate(
                Bucket=bucket,
                Prefix=f"{prefix}/" if prefix else "",
                **({} if recursive else {"Delimiter": "/"}),
            )
        )
        for page in pages:
            found.extend(page.get("Contents", ()))
    except DataError:
        raise
    except Exception as exc:
        raise failure(url, exc) from None
    return found


def list_keys(url: str) -> list[str]:
    """Every object key under ``url`` (:func:`list_objects`)."""
    return [item["Key"] for item in list_objects(url)]


@dataclass(frozen=True)
class S3Storage:
    """Objects in S3-compatible storage, named ``s3://bucket/key``; a batch's objects (or
    byte ranges of shards) are fetched concurrently, each within the read deadline."""

    #: ``data.read_timeout``: each read's deadline, which sets the requests' timeouts.
    read_timeout: float | None = DEFAULT_READ_TIMEOUT

    @property
    def remote(self) -> bool:
        """True: a request costs its latency whatever its size, so shards are read in
        blocks of ``data.block_mb``."""
        return True

    def read(self, url: str) -> Blob:
        """One object's bytes; an object that is gone is a bad file, other failures raise."""
        blob = self._get(url, None)
        return blob if isinstance(blob, DataError) else np.frombuffer(blob, dtype=np.uint8)

    def _get(self, url: str, span: tuple[int, int] | None) -> bytes | DataError:
        """The object's bytes (or ``span``: first byte and length of them)."""
        from botocore.exceptions import (
            ClientError,
            IncompleteReadError,
            ReadTimeoutError,
            ResponseStreamingError,
        )

        bucket, key = split_url(url)
        extra = {} if span is None else {"Range": f"bytes={span[0]}-{span[0] + span[1] - 1}"}
        s3 = client(request_timeout(self.read_timeout))
        for attempt in range(BODY_ATTEMPTS):
            try:  # botocore retries the request (errors, 5xx, throttling, timeouts) ...
                body = s3.get_object(Bucket=bucket, Key=key, **extra)["Body"]
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code in _MISSING:
                    return DataError(f"{url}: the object is gone ({code}); restore it or remove it")
                if code == "InvalidRange":
                    return DataError(f"{url}: shard is truncated; re-pack it")
                raise failure(url, exc) from None
            except Exception as exc:
                raise failure(url, exc) from None
            try:  # ... but not a body that breaks, stops or comes short after the head
                data: bytes = body.read()
            except (IncompleteReadError, ResponseStreamingError, ReadTimeoutError) as exc:
                body.close()  # the connection is dropped, not put back in the pool
                if attempt == BODY_ATTEMPTS - 1:
                    raise failure(url, exc) from None
                continue
            except Exception as exc:
                raise failure(url, exc) from None
            if span is not None and len(data) != span[1]:
                return DataError(f"{url}: shard is truncated; re-pack it")
            return data
        raise AssertionError("unreachable")

    def read_many(self, paths: Sequence[str], timeout: float | None) -> list[Blob]:
        """The objects' bytes, fetched on this process's thread pool, each within ``timeout``."""
        futures = [_pool().submit(read_all, self.read, [p], timeout) for p in paths]
        return [f.result()[0] for f in futures]

    def read_ranges(self, ranges: Sequence[tuple[str, int, int]]) -> list[bytes | DataError]:
        """Ranged GETs, concurrently on this process's thread pool."""
        futures = [_pool().submit(self._get, url, (start, n)) for url, start, n in ranges]
        return [f.result() for f in futures]

    def stat(self, paths: Sequence[str]) -> list[tuple[int, str] | None]:
        """Size and ETag of each object from one listing per folder they are in."""
        folders: dict[str, dict[str, tuple[int, str]]] = {}
        out: list[tuple[int, str] | None] = []
        for url in paths:
            folder, _, name = url.rpartition("/")
            if folder not in folders:
                prefix = split_url(folder)[1]
                start = len(prefix) + 1 if prefix else 0
                folders[folder] = {
                    o["Key"][start:]: (int(o["Size"]), str(o.get("ETag", "")).strip('"'))
                    for o in list_objects(folder, recursive=False)
                }
            out.append(folders[folder].get(name))
        return out

    def empty(self, root: str) -> bool:
        """Whether no object is under ``root`` (a listing of one key)."""
        bucket, prefix = split_url(root)
        try:
            page = client().list_objects_v2(
                Bucket=bucket, Prefix=f"{prefix}/" if prefix else "", MaxKeys=1
            )
        except Exception as exc:
            raise failure(root, exc) from None
        return not page.get("Contents")

    def write(
        self, url: str, fill: Callable[[BinaryIO], object], *, needed: int, hint: str
    ) -> None:
        """Spool ``fill``'s bytes to a local temporary file, then PUT them in one request
        with their MD5 (the server refuses a body that arrived damaged): an object appears
        whole or not at all, so an interrupted writer leaves nothing a reader takes."""
        bucket, key = split_url(url)
        try:
            with tempfile.TemporaryFile() as spool:
                fill(cast(BinaryIO, spool))
                spool.flush()
                size = spool.tell()
                if size > MAX_PUT:
                    raise WriteError(
                        f"cannot write {url}: {size} bytes is over S3's {MAX_PUT} for one "
                        "PUT; write smaller files (pack.shard_size_mb)"
                    )
                spool.seek(0)
                md5 = hashlib.md5(usedforsecurity=False)
                while block := spool.read(1 << 20):
                    md5.update(block)
                spool.seek(0)
                digest = base64.b64encode(md5.digest()).decode()
                client().put_object(Bucket=bucket, Key=key, Body=spool, ContentMD5=digest)
        except (DataError, WriteError):
            raise
        except OSError as exc:
            raise WriteError(
                f"cannot write {url}: the local spool file failed ({exc.strerror or exc}; "
                f"about {needed} bytes needed in {tempfile.gettempdir()}); {hint}"
            ) from None
        except Exception as exc:
            raise WriteError(f"cannot write {failure(url, exc, 's3:PutObject')}") from None

    def remove_all(self, root: str) -> None:
        """Delete every object under ``root``, a thousand per request; one line naming an
        object the server would not delete."""
        bucket, _ = split_url(root)
        keys = list_keys(root)
        try:
            for first in range(0, len(keys), 1000):
                chunk = [{"Key": k} for k in keys[first : first + 1000]]
                done = client().delete_objects(
                    Bucket=bucket, Delete={"Objects": chunk, "Quiet": True}
                )
                for error in done.get("Errors", ())[:1]:
                    raise DataError(
                        f"{S3_SCHEME}{bucket}/{error.get('Key')}: not deleted "
                        f"({error.get('Code')}: {error.get('Message')}); grant these "
                        "credentials s3:DeleteObject on it, or remove the objects yourself"
                    )
        except DataError:
            raise
        except Exception as exc:
            raise failure(root, exc, "s3:ListBucket and s3:DeleteObject") from None

    def remove_stale(self, directory: str) -> list[str]:
        """Nothing: a PUT that did not finish leaves no object behind."""
        return []


def forget_clients() -> None:
    """Drop this process's cached clients, so the next request reads the AWS variables
    again (after they changed, as when a test points the process at another server)."""
    with _lock:
        _clients.clear()
