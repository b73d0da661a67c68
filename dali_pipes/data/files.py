"""Files written whole or not at all: every file dali_pipes writes goes through here.

A file is written under a temporary name beside it (``.NAME.XXXXXXXX.tmp``), flushed to
disk and renamed over ``NAME``: a reader, a resumed run or a crash (``kill -9`` included)
finds the previous file or the new one, never a torn one. A failure (a full disk, a
read-only folder, ``torch.save``'s own write errors) removes the temporary file and is one
line naming the path, the free space and about how much was needed. The temporary files a
killed process left behind are removed by :func:`remove_stale` when the next run starts
writing there. A file gets the mode a plain ``open`` gives (``0o666`` less the umask), not
``mkstemp``'s ``0o600``, so a checkpoint is as readable as any other output.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from dali_pipes.errors import DaliPipesError

#: What a temporary file of :func:`write_atomic` is called (and the suffix of the partial
#: shards older versions wrote), for :func:`remove_stale`.
STALE_PATTERNS = (".*.tmp", "*.tar.partial")


class WriteError(DaliPipesError):
    """A file could not be written (disk full, read-only, ...); the previous one is intact."""


def write_atomic(
    path: Path,
    write: Callable[[BinaryIO], object],
    *,
    needed: int | None = None,
    hint: str = "free space or write elsewhere",
) -> None:
    """Write ``path`` whole or not at all: ``write(f)`` fills a temporary file beside it,
    which is synced and renamed over ``path``. ``needed`` (bytes, an estimate) goes into
    the one-line :class:`WriteError` a failure raises; ``hint`` says what to do."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _failure(path, exc, needed, hint) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # torch.save reports a failed write as RuntimeError
        raise _failure(path, exc, needed, hint) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_text(path: Path, text: str, *, hint: str = "free space or write elsewhere") -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (:func:`write_atomic`)."""
    data = text.encode()
    write_atomic(path, lambda f: f.write(data), needed=len(data), hint=hint)


def remove_stale(directory: Path) -> list[Path]:
    """Delete the temporary files a killed writer left in ``directory``; return them."""
    if not directory.is_dir():
        return []
    stale = sorted({p for pattern in STALE_PATTERNS for p in directory.glob(pattern)})
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def _failure(path: Path, exc: BaseException, needed: int | None, hint: str) -> WriteError:
    """The one-line error for a failed write of ``path``: the reason and the space."""
    try:
        free: int | None = shutil.disk_usage(_existing(path.parent)).free
    except OSError:
        free = None
    if isinstance(exc, OSError) and exc.strerror:
        reason = exc.strerror
    elif free is not None and needed is not None and free < needed:
        reason = "No space left on device"  # what torch.save's RuntimeError means here
    else:
        text = str(exc).strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
    space = "" if free is None else f"; {_size(free)} free there"
    if needed is not None:
        space += f", about {_size(needed)} needed" if space else f"; about {_size(needed)} needed"
    return WriteError(f"cannot write {path} ({reason}){space}; {hint}")


def _existing(directory: Path) -> Path:
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    return directory


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.1f} KB"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
