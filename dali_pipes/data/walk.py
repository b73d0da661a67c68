"""Listing an image folder's files as ImageFolder does (``sorted(os.walk(root,
followlinks=True))``), without entering a folder twice on one path, and naming what a path
that is not a regular file is."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)


def walk(folder: Path) -> list[os.DirEntry[str]]:
    """The non-folder entries under ``folder`` in ``sorted(os.walk(folder, followlinks=True))``
    order, names sorted within each folder, without entering a folder twice on one path (a
    symlink loop, named in a warning)."""
    found: list[tuple[str, list[os.DirEntry[str]]]] = []

    def visit(path: str, above: frozenset[tuple[int, int]]) -> None:
        try:
            st = os.stat(path)
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            return  # as os.walk: an unreadable folder is passed over
        key = (st.st_dev, st.st_ino)
        if key in above:
            log.warning("%s leads back to a folder above it (a symlink loop); not followed", path)
            return
        folders = [e for e in entries if _is_dir(e)]
        found.append((path, sorted((e for e in entries if not _is_dir(e)), key=lambda e: e.name)))
        for entry in folders:
            visit(entry.path, above | {key})

    visit(str(folder), frozenset())
    return [entry for _, entries in sorted(found, key=lambda f: f[0]) for entry in entries]


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def kind_of(path: str) -> str:
    """What a non-regular file is, in words."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "a broken symlink"
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "not a file"
