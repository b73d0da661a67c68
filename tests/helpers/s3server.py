"""A real S3 server for tests: moto's standalone server, a separate HTTP process on
127.0.0.1 (MinIO's server is on none of the registries the project can install from)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config

KEY, SECRET, REGION = "testing-key", "testing-secret", "us-east-1"


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """``moto_server`` on 127.0.0.1:``port``: start, stop, restart (in-memory: a restart
    starts empty, so a test puts its objects back), and a client to fill it."""

    def __init__(self, port: int | None = None, auth: bool = False) -> None:
        self.port = port or free_port()
        self.auth = auth
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL (``AWS_ENDPOINT_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The AWS variables that point a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
        }

    def start(self) -> S3Server:
        """Start the server and wait until it answers (at most 30 s)."""
        exe = Path(sys.executable).with_name("moto_server")
        env = dict(os.environ)
        if self.auth:  # every request is checked against moto's IAM: unknown keys fail
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        self.proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"moto_server exited with {self.proc.returncode}") from None
                time.sleep(0.05)
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} within 30 s")

    def stop(self) -> None:
        """Stop the server (its objects are lost)."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def client(self):  # type: ignore[no-untyped-def]
        """A boto3 client of this server, path-style."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}),
        )

    def upload(self, folder: Path, bucket: str, prefix: str) -> list[str]:
        """Put every file under ``folder`` at ``s3://bucket/prefix/<relative path>``
        (creating the bucket); the keys."""
        c = self.client()
        with contextlib.suppress(c.exceptions.BucketAlreadyOwnedByYou):
            c.create_bucket(Bucket=bucket)
        keys = []
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            key = f"{prefix}/{path.relative_to(folder).as_posix()}"
            c.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
            keys.append(key)
        return keys


class Relay:
    """A TCP relay on 127.0.0.1:``port`` to ``target``'s port: what a client sees of a
    server that goes away (connections refused, open ones reset) and comes back with its
    objects still there, which an in-memory moto cannot do across a restart by itself."""

    def __init__(self, target: int, port: int | None = None) -> None:
        self.target, self.port = target, port or free_port()
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []
        #: How many of the next connections get a ``503 SlowDown`` reply (then are closed)
        #: instead of the server: throttling as S3 answers it.
        self.throttle = 0

    @property
    def endpoint(self) -> str:
        """The relay's URL (``AWS_ENDPOINT_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Relay:
        """Accept connections and relay them."""
        import threading

        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(64)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        """Refuse new connections and reset the open ones."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self.conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        import threading

        while True:
            try:
                a, _ = listener.accept()
            except OSError:
                return
            if self.throttle > 0:
                self.throttle -= 1
                self._slow_down(a)
                continue
            b = socket.create_connection(("127.0.0.1", self.target))
            self.conns += [a, b]
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _slow_down(conn: socket.socket) -> None:
        request = b""
        while b"\r\n\r\n" not in request and (chunk := conn.recv(65536)):
            request += chunk
        body = b"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>"
        conn.sendall(
            b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        conn.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
