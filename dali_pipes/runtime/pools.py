"""Pools of worker processes that start from one fresh interpreter, not one each.

``spawn`` starts every worker as a new interpreter, which imports torch, torchvision and
DALI again: seconds of CPU per core before any work (``bench``'s decode ceiling and
``scan`` start one worker per core). ``fork`` of a process whose DALI or torch threads are
running is not safe. A ``forkserver`` gives both: one fresh interpreter, with no threads of
ours, imports the modules the workers need once, and every worker is forked from it.

The server is started once per process and later pools reuse it (their ``preload`` is
then only imported on first use in each worker). It keeps the environment of the moment it
started, so every worker takes the pool's caller's environment as it is now before it runs
anything: credentials or settings exported after the first pool (``AWS_*`` for a bucket's
``scan``) reach the workers as they would under ``spawn``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import importlib.machinery
import io
import os
import pickle
import sys
from collections.abc import Callable, Sequence
from multiprocessing import get_context
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any

from dali_pipes import registry


def fresh_context(preload: Sequence[str]) -> Any:
    """The ``forkserver`` context whose server imports the ``preload`` modules when it
    starts (the first pool or loader of this process starts it)."""
    context = get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    return context


def fresh_pool(
    processes: int,
    preload: Sequence[str],
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Pool:
    """A pool of ``processes`` workers forked from a fresh interpreter that imported the
    ``preload`` modules (those of the functions the pool runs, and what they import)."""
    start = (dict(os.environ), initializer, initargs)
    return fresh_context(preload).Pool(processes, _start_worker, start)


def importable_afresh(obj: Any) -> bool:
    """Whether a fresh interpreter can rebuild ``obj`` from its pickle: it pickles, and
    every class and function it refers to lives in a module that interpreter can import
    by name (not ``__main__``, a notebook or a module made at run time)."""
    modules: set[str] = set()

    class _Collecting(pickle.Pickler):
        def reducer_override(self, value: Any) -> Any:
            if isinstance(value, type) or callable(value):
                modules.add(str(getattr(value, "__module__", None) or "__main__"))
            return NotImplemented

    try:
        _Collecting(io.BytesIO(), pickle.HIGHEST_PROTOCOL).dump(obj)
    except Exception:  # any failure to pickle: it cannot travel
        return False
    return all(_importable(name) for name in modules)


def _importable(name: str, path: Sequence[str] | None = None) -> bool:
    """Whether a fresh interpreter with this import path (or ``path``) finds the module
    ``name`` by name (one made at run time, or ``__main__``, it does not)."""
    if name in ("__main__", "__mp_main__"):
        return False
    top = name.partition(".")[0]
    if top in sys.builtin_module_names:
        return True
    try:
        found = importlib.machinery.PathFinder.find_spec(top, list(path or sys.path))
    except (ImportError, ValueError):
        return False
    return found is not None


def _folder_of(name: str) -> str | None:
    """The folder the imported module ``name``'s top-level package was found in (None
    for a module without a file)."""
    top = sys.modules.get(name.partition(".")[0])
    where = getattr(top, "__file__", None)
    if not where:
        return None
    path = Path(where)
    return str(path.parent.parent if path.name == "__init__.py" else path.parent)


class CallersEnvironment:
    """A DataLoader ``worker_init_fn`` for workers of :func:`fresh_context`: the worker
    takes the environment and import path its loader's caller had when this was made,
    and imports the
    modules of the plug-ins registered in the caller (their ops, sources and operations
    register there again). :attr:`portable` says whether a fresh interpreter can."""

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        self.modules = sorted(registry.plugin_modules())
        # Where the caller finds its plug-ins: its import path, and the folder of a plug-in
        # imported from one no longer on it.
        self.path = list(sys.path)
        for name in self.modules:
            folder = None if _importable(name, self.path) else _folder_of(name)
            if folder is not None:
                self.path.append(folder)

    @property
    def portable(self) -> bool:
        """Whether every plug-in module can be imported by name afresh."""
        return all(_importable(name, self.path) for name in self.modules)

    def __call__(self, worker_id: int) -> None:
        crashes_print_their_stack(worker_id)
        os.environ.clear()
        os.environ.update(self.environ)
        sys.path[:] = self.path
        for name in self.modules:
            importlib.import_module(name)


def crashes_print_their_stack(worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: a worker killed by a signal (a segmentation fault)
    prints its Python stack to stderr, which DataLoader otherwise loses. It writes to file
    descriptor 2, not ``sys.stderr``: a test runner or notebook may have replaced that with
    an object without a file, and the crash must still be told."""
    with contextlib.suppress(OSError, ValueError):  # no descriptor 2 at all
        faulthandler.enable(file=2, all_threads=True)


def _start_worker(
    environ: dict[str, str],
    initializer: Callable[..., object] | None,
    initargs: tuple[Any, ...],
) -> None:
    """Give the worker its caller's environment, then run the pool's own initializer."""
    os.environ.clear()
    os.environ.update(environ)
    if initializer is not None:
        initializer(*initargs)
