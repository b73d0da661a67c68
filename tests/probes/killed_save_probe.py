"""``python -m dali_pipes.train`` killed with SIGKILL half-way through its second
checkpoint write, as a node that dies mid-save. Usage: killed_save_probe.py [overrides]."""

from __future__ import annotations

import os
import signal
from typing import Any

import torch

save = torch.save
saves = 0


def dies_on_the_second(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
    global saves
    saves += 1
    if saves == 2:
        f.write(b"half a checkpoint")
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    save(obj, f, *args, **kwargs)


torch.save = dies_on_the_second

from dali_pipes.train.run import main  # noqa: E402

main()
