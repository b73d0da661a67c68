"""``python -m dali_pipes.train`` whose read of one file never returns, as on a dead mount.

Usage: blocked_read_probe.py FILE [train overrides...]. Prints ``blocked`` once the read of
FILE has started; the signal tests then stop the run.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from dali_pipes.image import decode

blocked = sys.argv[1]
read = decode._read


def never_returns(path: str) -> Any:
    if path == blocked:
        print("blocked", flush=True)
        threading.Event().wait()
    return read(path)


decode._read = never_returns
sys.argv = [sys.argv[0], *sys.argv[2:]]

from dali_pipes.train.run import main  # noqa: E402

main()
