"""Checkpoints that are never half-written, and finding the latest one.

A checkpoint is written to a temporary file in the same directory, flushed to disk, then
renamed over its final name: a reader sees the old file or the new one, never a torn
one, even if the process is killed mid-write. An unwritable or full output directory
fails with one clear message and leaves the previous checkpoint in place.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from dali_pipes.errors import DaliPipesError

_NAME = re.compile(r"epoch_(\d{4,})\.pt$")


def checkpoint_path(directory: Path, epoch: int) -> Path:
    return directory / f"epoch_{epoch:04d}.pt"


def save_atomic(state: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise DaliPipesError(
            f"cannot write checkpoint {path} ({exc.strerror or exc}); "
            "free space or choose a writable output_dir"
        ) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def latest(directory: Path) -> Path | None:
    """The checkpoint with the highest epoch number in ``directory``, if any."""
    if not directory.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.search(p.name))]
    return max(found)[1] if found else None


def prune(directory: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest checkpoints."""
    found = sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.search(p.name)))
    for _, path in found[:-keep]:
        path.unlink(missing_ok=True)


def load(path: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError) as exc:
        raise DaliPipesError(
            f"cannot read checkpoint {path} ({exc}); delete it or pass resume=null"
        ) from None
    return state
