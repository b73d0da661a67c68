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

import os
from collections.abc import Callable, Sequence
from multiprocessing import get_context
from multiprocessing.pool import Pool
from typing import Any


def fresh_pool(
    processes: int,
    preload: Sequence[str],
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Pool:
    """A pool of ``processes`` workers forked from a fresh interpreter that imported the
    ``preload`` modules (those of the functions the pool runs, and what they import)."""
    context = get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    start = (dict(os.environ), initializer, initargs)
    return context.Pool(processes, _start_worker, start)


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
