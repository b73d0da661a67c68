"""The bad-file manifest: a CSV of ``path,reason`` rows, written by ``python -m dali_pipes.scan``.

Paths are absolute (resolved), so a manifest matches however the data root was spelled;
``s3://`` URLs are kept as they are.
It is written atomically: a reader never sees half a manifest.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from pathlib import Path

from dali_pipes.data.files import write_text
from dali_pipes.data.storage import is_url
from dali_pipes.errors import DataError


def write_manifest(path: Path, bad: Iterable[tuple[str, str]]) -> None:
    """Write the ``path,reason`` manifest atomically (``data.exclude`` reads it)."""
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(["path", "reason"])
    for file, reason in sorted(bad):
        out.writerow([_absolute(file), reason])
    write_text(path, buf.getvalue(), hint="free space or choose another scan.out")


def read_manifest(path: str | os.PathLike[str]) -> dict[str, str]:
    """``{resolved path: reason}``; a missing or malformed manifest is a one-line error."""
    file = Path(path).expanduser()
    try:
        with file.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise DataError(
            f"data.exclude={path}: cannot read the manifest ({exc.strerror or exc}); "
            "run python -m dali_pipes.scan first or fix the path"
        ) from None
    if rows and not {"path", "reason"} <= set(rows[0]):
        raise DataError(f"data.exclude={path}: not a scan manifest (needs path,reason columns)")
    return {_absolute(r["path"]): r["reason"] for r in rows}


def _absolute(path: str) -> str:
    return path if is_url(path) else str(Path(path).resolve())
