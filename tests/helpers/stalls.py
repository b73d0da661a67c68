"""A read that never returns, as on a dead mount, for the tests of the read deadline.

The file is a regular file whenever a folder is listed (the listing refuses FIFOs) and a
FIFO no one writes to right after: every reader -- Python's, the compiled batch reader's,
any C library call -- then blocks in ``open`` until a writer comes, as ``open`` blocks on a
mount whose server is gone. :meth:`Stall.watch` says when a thread of this process is
blocked there (Linux: its ``wchan``); :meth:`Stall.release` lets every blocked reader go
with an end of file.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dali_pipes.data import sources


class Stall:
    """``path`` (a regular file of a folder) stalls every read after each listing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.content = path.read_bytes()

    def install(self, setattr: Callable[[Any, str, Any], None]) -> None:
        """Wrap the folder listing (``setattr``: ``monkeypatch.setattr``, or plain setattr
        in a process of its own): the file is regular while listed, a FIFO after."""
        listing = sources.discover_folder

        def listed_then_stalled(*args: Any, **kwargs: Any) -> Any:
            self._regular()
            try:
                return listing(*args, **kwargs)
            finally:
                self._fifo()

        setattr(sources, "discover_folder", listed_then_stalled)

    def _regular(self) -> None:
        if self.path.is_fifo():
            self.release()
            self.path.unlink()
            self.path.write_bytes(self.content)

    def _fifo(self) -> None:
        self.path.unlink()
        os.mkfifo(self.path)

    def watch(self, on_blocked: Callable[[], None]) -> None:
        """On a thread: call ``on_blocked`` once a thread of this process waits in ``open``
        for the FIFO's writer (the kernel's ``wait_for_partner``)."""

        def blocked() -> bool:
            for task in Path("/proc/self/task").iterdir():
                with contextlib.suppress(OSError):
                    if "partner" in (task / "wchan").read_text():
                        return True
            return False

        def wait() -> None:
            while not blocked():
                time.sleep(0.01)
            on_blocked()

        threading.Thread(target=wait, daemon=True).start()

    def release(self) -> None:
        """Let every reader blocked on the FIFO go (a writer comes and goes: end of file)."""
        with contextlib.suppress(OSError):  # ENXIO: no reader is waiting
            os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))


@contextlib.contextmanager
def fifo_at(path: Path) -> Iterator[Path]:
    """A FIFO no one writes to at ``path``: opening it for reading blocks until a writer
    comes; at exit a writer comes and goes, so a reader left blocked in ``open`` returns."""
    os.mkfifo(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):  # ENXIO: no reader is left waiting
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
