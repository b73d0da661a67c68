"""Small real file systems for the disk-full and read-only tests: a tmpfs of a given size."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, size_kb: int, *, read_only: bool = False) -> Iterator[Path]:
    """Mount a ``size_kb`` tmpfs at ``where`` (made if needed) for the ``with`` block. It
    needs root, which CI and the developers' machines run as; elsewhere the test skips and
    says why."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kb}k" + (",ro" if read_only else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path, leave: int = 0) -> Path:
    """Fill the file system of ``where`` until at most ``leave`` bytes are free."""
    filler = where / "filler.bin"
    with open(filler, "ab") as f:
        block = b"\0" * 65536
        while (free := os.statvfs(where).f_bavail * os.statvfs(where).f_frsize) > leave:
            try:
                f.write(block[: max(1, min(len(block), free - leave))])
                f.flush()
            except OSError:
                break
    return filler
