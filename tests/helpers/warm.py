"""The interpreter the tests start their commands with: warm, as the docs' pages are run.

A test that runs ``python -m dali_pipes.train`` (or a probe script, or torchrun's ranks)
in a new process pays the imports of torch, DALI, Hydra and torch's compiler stack before
the command does anything, and on the 2-core CI machine that start-up was the largest
single cost of the suite. :func:`python` is the ``python`` of a warm interpreter
(scripts/warm_python.py), one per test process, started on first use: each command is a
process forked from its finished imports, with the command's own arguments, folder,
environment and streams, and it ends, prints and returns as a new interpreter would
(tests/docs/test_warm_python.py holds it to that).

Some tests must start a real interpreter and use ``sys.executable``: those that measure
what a fresh interpreter imports, read a process tree, check which installed copy is
imported, start a command with a signal ignored, or ``kill -9`` the process they started
(the warm command would die an instant after its client, not with it). A command whose
start-up environment differs from the server's (``PYTHONPATH``, ``OMP_NUM_THREADS``, ...)
runs cold by itself. ``DALI_PIPES_TESTS_COLD=1`` runs every command cold: the way to
compare, and the way to charge each test's commands to it in ``tests.helpers.cputime``
(a warm command is the server's child, not the test's).
"""

from __future__ import annotations

import os
import sys

from warm_python import this_process

#: The test process's environment as it starts (tests/conftest.py has set its threads):
#: the server's, whatever a test changes later.
_STARTED = dict(os.environ)


def cold() -> bool:
    """Whether the tests' commands run in a new interpreter each (DALI_PIPES_TESTS_COLD=1)."""
    return os.environ.get("DALI_PIPES_TESTS_COLD") == "1"


def python() -> str:
    """The ``python`` to start a test's command with: this process's warm interpreter
    (started now if it is not running; the docs' pages share it), or the real one when
    :func:`cold`."""
    return sys.executable if cold() else str(this_process(_STARTED).bin / "python")
