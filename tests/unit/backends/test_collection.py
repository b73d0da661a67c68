"""A DALI loader left mid-epoch and collected by the garbage collector on one of DALI's own
threads neither drains nor destroys its pipeline there (nor lets the collector finalise
the pipeline there: :func:`dali_pipes.backends.dali.lifecycle.hold`).

The DALI CPU graph runs Python on DALI's threads (the resize's ``python_function``), so a
garbage collection can start there and finalise a loader that was dropped without
``close()``. Draining its epoch from its own pipeline's thread waited for that thread
forever: ``make test`` once hung in a torch ``DataLoader``'s fork behind such a thread.
The script below makes the collection happen there on purpose (the resize callback of
the dropped loader's next prefetched batch waits until the loader is garbage, then
collects) and reports whether the callback came back.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from conftest import BUNDLED_PHOTOS, REPO
from helpers.warm import python

ROOT = REPO

SCRIPT = textwrap.dedent(
    """
    import gc, sys, threading
    from dali_pipes import DALIIterator
    from dali_pipes.image.resample import WindowResize

    garbage = threading.Event()
    returned = threading.Event()
    calls = []
    plain = WindowResize.__call__

    def collecting(self, *args):
        calls.append(1)
        if len(calls) == 3:  # a prefetched batch, run after the consumer took the first
            garbage.wait(30)
            gc.collect()  # on DALI's thread, as an allocation there may trigger it
            out = plain(self, *args)
            returned.set()
            return out
        return plain(self, *args)

    WindowResize.__call__ = collecting
    loader = DALIIterator(sys.argv[1], batch_size=4, device="cpu", num_threads=1)
    batches = iter(loader)
    next(batches)
    gc.disable()  # the collection must happen on DALI's thread, not here
    del loader, batches
    garbage.set()
    print("callback returned" if returned.wait(60) else "deadlocked", flush=True)
    gc.enable()
    again = DALIIterator(sys.argv[1], batch_size=4, device="cpu", num_threads=1)
    print("next loader ran", sum(len(labels) for _, labels in again), flush=True)
    again.close()
    """
)


def test_a_loader_collected_on_a_dali_thread_does_not_deadlock(tmp_path: Path) -> None:
    done = subprocess.run(
        [python(), "-c", SCRIPT, str(BUNDLED_PHOTOS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert "callback returned" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "next loader ran 13" in done.stdout, done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
    # The dropped loader's pipeline is not finalised on DALI's thread (a shutdown joining
    # the thread it runs on), which left it impossible to destroy later.
    assert "Resource deadlock avoided" not in done.stderr, done.stderr[-3000:]
    # The closed loader still referenced when the interpreter exits says nothing then (its
    # __del__ ran into modules already torn down).
    assert "Exception ignored" not in done.stderr, done.stderr[-3000:]
