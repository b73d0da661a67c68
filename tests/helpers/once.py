"""Expensive things made once per test run and shared by every pytest-xdist worker.

A session fixture is made once per *process*: under ``make test`` each of the two xdist
workers would train its own reference run, build its own wheel. :func:`made_once` makes the
thing once for the whole run, in a folder all workers of the run share (the parent of the
workers' temporary folders), under a file lock: the first worker to ask makes it, a worker
that asks meanwhile waits for it, every later one reuses it. Wrapped in a session fixture it
is made at most once per run and looked up at most once per worker.

What is made is read-only to the tests that use it: a test that changes it (resumes a run,
deletes a file) copies it into its own ``tmp_path`` first, so the tests stay independent
of each other and of the order they run in.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def run_dir(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this test run shares: the parent of the workers' own
    temporary folders under pytest-xdist, the run's temporary folder without it."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(
    factory: pytest.TempPathFactory, name: str, make: Callable[[Path], dict[str, Any] | None]
) -> tuple[Path, dict[str, Any]]:
    """The folder ``name`` and the facts ``make`` returned, made by ``make(folder)`` once
    per test run (``make`` gets an empty folder and may return JSON-able facts about what it
    made, e.g. an exit code). If ``make`` fails, this test fails with its error and every
    later caller fails at once, naming it, rather than making it again (or skips, where
    ``make`` skipped)."""
    shared = run_dir(factory) / "made-once"
    shared.mkdir(exist_ok=True)
    folder, done, failed = (shared / name, shared / f"{name}.json", shared / f"{name}.failed")
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
        if done.exists():
            return folder, json.loads(done.read_text())
        if failed.exists():
            kind, _, why = failed.read_text().partition("\n")
            if kind == "skip":
                pytest.skip(why)
            pytest.fail(f"{name}, made once for the run's tests, failed: {why}")
        shutil.rmtree(folder, ignore_errors=True)  # left by a worker that died making it
        folder.mkdir()
        try:
            facts = make(folder) or {}
        except BaseException as exc:
            skipped = isinstance(exc, pytest.skip.Exception)
            why = str(exc)[:2000] if skipped else f"{type(exc).__name__}: {str(exc)[:2000]}"
            failed.write_text(f"{'skip' if skipped else 'fail'}\n{why}")
            raise
        done.write_text(json.dumps(facts))
    return folder, facts
