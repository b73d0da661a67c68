"""Pipelines' lives: ended before DALI's own exit hook, and released on a safe thread.

Loaders holding a pipeline are closed at interpreter exit before DALI shuts its pipelines
down (:func:`opened`). Pipelines of loaders the garbage collector found on a thread other
than the one that built them (:func:`orphan`) are released on a thread of the program's
own, at the next build, close or exit (:func:`release_orphans`). A pipeline that failed is
destroyed where it failed, before its error reaches the caller (:func:`end`).
"""

from __future__ import annotations

import atexit
import threading
import traceback
import weakref
from typing import Any, Protocol


class Closing(Protocol):
    """A loader that can end its epoch and pipeline without draining it."""

    def close_at_exit(self) -> None:
        """End the epoch and release the pipeline, without draining it."""


# Loaders with a pipeline, closed at interpreter exit before DALI shuts its pipelines down.
_open_loaders: weakref.WeakSet[Any] = weakref.WeakSet()
_exit_hook = False

# Pipelines of loaders the garbage collector found on a thread other than the one that
# built them. The CPU graph runs Python (the resize's ``python_function``) on DALI's
# threads, so a collection can run there; destroying or draining a pipeline from one of
# its own threads (or one whose threads wait for the GIL) deadlocks. They are kept here
# and released on a thread of the program's own: at the next build, close or exit.
_orphans: list[Any] = []
_orphans_lock = threading.Lock()
# Built pipelines of live loaders, by id (:func:`hold`): never the collector's to finalise.
_held: dict[int, Any] = {}


def release_orphans() -> None:
    """Destroy the pipelines kept by :func:`orphan`, here, on the caller's thread."""
    with _orphans_lock:
        orphans = _orphans[:]
        _orphans.clear()
    del orphans  # the pipelines are destroyed here, on the caller's thread


def _close_open_loaders() -> None:
    """Close every loader still holding a pipeline, without draining it.

    DALI's own atexit hook shuts every pipeline down; a suspended epoch (a script that
    stopped after ``next(iter(loader))``) would then be finalised during interpreter
    teardown, drain a pipeline that is gone and print "Exception ignored in ...". Run
    before DALI's hook (atexit runs hooks in reverse order of registration, and this one is
    registered after DALI is imported), it ends those epochs while their pipelines live.
    """
    for loader in list(_open_loaders):
        loader.close_at_exit()
    release_orphans()


def _register_exit_hook() -> None:
    """Register :func:`_close_open_loaders` once, after DALI's own hook (atexit runs
    hooks in reverse order of registration)."""
    global _exit_hook
    if not _exit_hook:
        import nvidia.dali.pipeline  # noqa: F401 - DALI's shutdown hook is registered first

        atexit.register(_close_open_loaders)
        _exit_hook = True


def opened(loader: Closing) -> None:
    """``loader`` now holds a built pipeline: close it at exit, before DALI's hook."""
    _register_exit_hook()
    _open_loaders.add(loader)


def closed(loader: Closing) -> None:
    """``loader`` released its pipeline."""
    _open_loaders.discard(loader)


def hold(pipe: Any) -> Any:
    """Hold ``pipe`` (a built pipeline) here until its owner lets it go; returns it.

    A loader dropped without ``close()`` is cyclic garbage, and a pipeline held only by its
    loader would be too: the collector then calls the pipeline's own finaliser wherever
    it runs -- on one of DALI's threads, a shutdown that joins the very thread it runs on
    ("Resource deadlock avoided"), after which destroying the pipeline hangs. Held here
    the pipeline is never garbage; its loader lets it go on a safe thread (:func:`let_go`)
    or orphans it (:func:`orphan`)."""
    with _orphans_lock:
        _held[id(pipe)] = pipe
    return pipe


def let_go(pipe: Any) -> None:
    """Stop holding ``pipe`` (on a thread that may destroy it): it is freed with its
    owner's last reference (None: nothing to do)."""
    if pipe is not None:
        with _orphans_lock:
            _held.pop(id(pipe), None)


def end(pipe: Any, error: BaseException) -> None:
    """Make ``pipe``, which failed with ``error``, end with its holder's reference, which
    the caller drops next, on its own thread (it holds no other reference).

    A failed pipeline is never run again, but its error's traceback holds it (DALI's
    frames, and the loader's), and whoever catches the error may keep it for long
    (``pytest.raises``, a retry loop, a logged exception). The pipeline would then be
    destroyed whenever the error is: by the garbage collector, on whatever thread it runs,
    one of this very pipeline's threads included, still resizing the batches prefetched
    before the failure. DALI's shutdown there joins the thread it runs on ("Resource
    deadlock avoided") and the process aborts. So the locals of the error's finished
    frames are cleared (the traceback keeps its files, lines and functions, not their
    variables) and the pipeline is no longer held: when its holder lets it go, DALI shuts
    it down there."""
    _clear_frames(error)
    let_go(pipe)


def _clear_frames(error: BaseException) -> None:
    """Clear the locals of the finished frames of ``error``'s traceback and of the
    tracebacks of the errors it chains to (a frame still running is left as it is)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        pending += [exc.__cause__, exc.__context__]
        if isinstance(exc, BaseExceptionGroup):
            pending += list(exc.exceptions)


def orphan(pipe: Any) -> None:
    """Keep ``pipe`` for a safe thread to destroy (:func:`release_orphans`)."""
    with _orphans_lock:
        _held.pop(id(pipe), None)
        _orphans.append(pipe)
