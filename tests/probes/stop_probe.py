"""Run under torchrun by tests/e2e/test_preemption.py: do the ranks agree on when to stop?

Rank 1 signals itself (SIGTERM) before step 3; every rank polls its StopRequest after each
"step" (a short sleep, skewed per rank so the ranks are never in lockstep) and writes the
step it stopped after. Usage: torchrun --nproc_per_node=N tests/probes/stop_probe.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import torch.distributed as tdist

from dali_pipes.runtime.preemption import StopRequest

out = Path(sys.argv[1])
tdist.init_process_group("gloo")
rank = tdist.get_rank()
stopped_after = None
with StopRequest() as stop:
    for step in range(50):
        if rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01 * (1 + rank))
        if stop.poll():
            stopped_after = step
            break
    (out / f"rank{rank}.json").write_text(
        json.dumps({"stopped_after": stopped_after, "signum": stop.signum})
    )
tdist.destroy_process_group()
