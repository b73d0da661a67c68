"""A real S3 server for tests: moto's standalone server, a separate HTTP process on
127.0.0.1 (MinIO's server is on none of the registries the project can install from)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
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
        #: How many of the next requests get no answer at all (the relay swallows them and
        #: holds the connection open): a server that stalls, which the client must time out.
        self.stall = 0
        #: How many of the next replies stop after their head and a few bytes of the body,
        #: the connection held open: a reply that stalls mid-body.
        self.stall_body = 0
        self._counts = threading.Lock()

    @property
    def endpoint(self) -> str:
        """The relay's URL (``AWS_ENDPOINT_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Relay:
        """Accept connections and relay them."""
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

    def away_for(self, seconds: float) -> None:
        """Go away now (:meth:`stop`) and come back ``seconds`` later."""
        self.stop()
        threading.Timer(seconds, self.start).start()

    def stall_next(self, requests: int, bodies: int) -> None:
        """Swallow the next ``requests`` requests and cut the ``bodies`` replies after."""
        with self._counts:
            self.stall, self.stall_body = requests, bodies

    def _take(self, name: str) -> bool:
        """Whether one more of ``name`` (a count above) is due now; counts it off."""
        with self._counts:
            due = getattr(self, name) > 0
            if due:
                setattr(self, name, getattr(self, name) - 1)
            return due

    def _accept(self, listener: socket.socket) -> None:
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
            cut = threading.Event()  # set: the reply in flight stops after its head
            threading.Thread(target=self._requests, args=(a, b, cut), daemon=True).start()
            threading.Thread(target=self._replies, args=(b, a, cut), daemon=True).start()

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

    def _requests(self, src: socket.socket, dst: socket.socket, cut: threading.Event) -> None:
        """Client to server; a request that is to stall is swallowed, with what follows."""
        swallowing = False
        try:
            while data := src.recv(65536):
                if not swallowing and data.split(b" ", 1)[0] in METHODS:  # a new request
                    swallowing = self._take("stall")
                    if not swallowing and self._take("stall_body"):
                        cut.set()
                if not swallowing:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)

    @staticmethod
    def _replies(src: socket.socket, dst: socket.socket, cut: threading.Event) -> None:
        """Server to client; a reply that is to stop is passed on up to its head and 16
        bytes of its body, and nothing after: the client's side stays open (until the
        client gives up and closes it) even where the server closes its own."""
        head = b""
        try:
            while data := src.recv(65536):
                if cut.is_set():
                    head += data
                    end = head.find(b"\r\n\r\n")
                    if end >= 0:
                        dst.sendall(head[: end + 4 + 16])
                        while src.recv(65536):  # the rest is dropped
                            pass
                        return  # the requests' side closes both when the client has gone
                    continue
                dst.sendall(data)
        except OSError:
            pass
        _close(src, dst)


@contextlib.contextmanager
def relayed(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[Relay]:
    """This process's S3 clients pointed at ``server`` through a :class:`Relay` (started
    here, stopped at the end), for faults injected between them."""
    from dali_pipes.data.s3 import forget_clients

    relay = Relay(server.port).start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", relay.endpoint)
        forget_clients()
        yield relay
    finally:
        relay.stop()


#: The first word of an HTTP request.
METHODS = {b"GET", b"HEAD", b"PUT", b"POST", b"DELETE"}


def _close(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
