"""``python -m dali_pipes.train`` whose read of one file never returns, as on a dead mount.

Usage: blocked_read_probe.py FILE [train overrides...]. FILE (a file of the folder trained
on) is a FIFO no one writes to once the folder is listed (:mod:`helpers.stalls`), so its
read blocks in ``open`` for good, whichever reader opens it. Prints ``blocked`` once a
thread waits there; the signal tests stop the run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

from helpers.stalls import Stall

stall = Stall(Path(sys.argv[1]))
stall.install(setattr)
stall.watch(lambda: print("blocked", flush=True))
sys.argv = [sys.argv[0], *sys.argv[2:]]

from dali_pipes.train.run import main  # noqa: E402

main()
