"""The S3 client layer's own rules, without a server: fork safety and one-line errors
(requests against a real server are in tests/e2e/test_object_storage*.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from helpers.warm import python

from dali_pipes.data import s3
from dali_pipes.errors import DataError


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    """No client made for a test's made-up endpoint outlives it."""
    s3.forget_clients()
    yield
    s3.forget_clients()


#: Run in a process of its own: forking the test runner itself forks whatever else it holds
#: (a browser session's, DALI's threads), which made the child crash now and then.
FORK_WHILE_HELD = """
import os, sys, threading, time
from dali_pipes.data import s3

held, release = threading.Event(), threading.Event()

def hold():
    with s3._lock:
        held.set()
        release.wait(30)

holder = threading.Thread(target=hold)
holder.start()
assert held.wait(10)
pid = os.fork()
if pid == 0:  # the worker: a client and the pool, each behind the lock
    code = 1
    try:
        s3.client()
        s3._pool()
        code = 0
    finally:
        os._exit(code)
deadline = time.monotonic() + 30
while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
    time.sleep(0.05)
if done[0] == 0:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
release.set()
holder.join()
print("hung" if done[0] == 0 else f"exit {os.waitstatus_to_exitcode(done[1])}")
"""


def test_a_forked_worker_reads_even_when_a_parent_thread_held_the_lock_at_the_fork() -> None:
    """A DataLoader forks its workers while the parent's reader threads may be inside the
    module's lock (building a client): the child must not inherit it held."""
    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # nothing is requested
    done = subprocess.run(
        [python(), "-c", FORK_WHILE_HELD], env=env, capture_output=True, text=True, timeout=90
    )
    assert done.stdout.strip() == "exit 0", done.stdout + done.stderr[-2000:]


def test_an_invalid_bucket_name_is_one_line_naming_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore refuses it before sending anything, in a message of several lines."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    with pytest.raises(DataError) as info:
        s3.list_objects("s3://bad_bucket!/photos")
    line = str(info.value)
    assert line.startswith("s3://bad_bucket!/photos: not a valid S3 request") and "\n" not in line
    assert "no answer" not in line  # not the network's fault


def test_an_endpoint_with_a_password_in_it_is_not_repeated_in_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://someone:hunter2@127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    with pytest.raises(DataError) as info:
        s3.list_objects("s3://bucket/photos")  # nothing listens on port 9
    line = str(info.value)
    assert "no answer from http://127.0.0.1:9" in line
    assert "hunter2" not in line and "someone" not in line and "\n" not in line
