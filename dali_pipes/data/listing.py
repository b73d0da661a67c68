"""ImageFolder's listing rules, for any tree of class folders: a folder on disk, a prefix
in a bucket (:func:`~dali_pipes.data.sources.discover_folder`) or a zip archive
(:mod:`dali_pipes.data.zip_archive`).

A source that lists ``<class>/**/<image>`` hands each class folder's entries, in the order
``os.walk`` would give them, to :meth:`ClassListing.add_class`; the rules are kept here
once: which extensions are images, which are refused (judged by ``data.on_error``), what
the scan manifest of ``data.exclude`` leaves out, what a class folder with no usable image
means. A source of another tree keeps only how it finds the classes and their entries.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dali_pipes.data.policy import OnError
from dali_pipes.data.walk import kind_of
from dali_pipes.errors import DataError
from dali_pipes.image.headers import IMAGE_EXTENSIONS, UNSUPPORTED_EXTENSIONS

log = logging.getLogger(__name__)


def _same(name: str) -> str:
    """A name as the manifest names it: itself."""
    return name


@dataclass
class ClassListing:
    """What a listing has found so far: the samples (name and label, in ImageFolder order),
    the names left out with why (``rejected``), and how many were ignored (no image
    extension, as ImageFolder ignores them)."""

    on_error: str
    #: The scan manifest (``data.exclude``): name -> why it was left out.
    excluded: dict[str, str] = field(default_factory=dict)
    #: How a sample's name is looked up in the manifest (a local file: its resolved path).
    manifest_key: Callable[[str], str] = _same
    files: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    ignored: int = 0

    def add_class(self, folder: str, entries: Iterable[tuple[str, bool]], label: int) -> int:
        """List one class folder's ``(name, is a regular file)`` entries under ``label``;
        how many samples it gave. A class with none is an error under ``on_error=raise``
        (unless the manifest left its images out), else a warning: it keeps its label."""
        found = excluded = 0
        for name, regular in entries:
            ext = os.path.splitext(name)[1].lower()
            if ext in UNSUPPORTED_EXTENSIONS:
                self._reject(name, f"{ext} images are not supported; convert it to JPEG or PNG")
            elif ext not in IMAGE_EXTENSIONS:
                self.ignored += 1
            elif not regular:
                self._reject(name, f"is not a regular file ({kind_of(name)}); replace it")
            elif self.excluded and (why := self.excluded.get(self.manifest_key(name))):
                self.rejected.append((name, f"in the scan manifest: {why}"))
                excluded += 1
            else:
                self.files.append(name)
                self.labels.append(label)
                found += 1
        if not found:
            self._empty(folder, label, manifested=excluded > 0)
        return found

    def log_ignored(self, top: str) -> None:
        """Say (at info level) how many files of ``top`` had no image extension."""
        if self.ignored:
            log.info("%s: ignored %d files without an image extension", top, self.ignored)

    def _reject(self, name: str, message: str) -> None:
        OnError(self.on_error).judge(
            name,
            DataError(f"{name}: {message}, or remove it"),
            lambda _, __: self.rejected.append((name, message)),
        )

    def _empty(self, folder: str, label: int, *, manifested: bool) -> None:
        message = (
            f"class folder {folder} has no usable images "
            f"({', '.join(IMAGE_EXTENSIONS)}); add images or remove the folder"
        )
        if manifested:  # the user left them out: no mistake
            message = f"every image of class folder {folder} is in the scan manifest"
        elif not OnError(self.on_error).tolerates:
            raise DataError(message)
        log.warning("%s (class %d kept, with no samples)", message, label)
