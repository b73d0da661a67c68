"""Run under torchrun by tests/e2e/test_object_storage.py: each rank opens a bucket's train
split and writes the files it got; every rank but 0 is pointed at a port nothing answers
on, so it can only have its listing from rank 0.

Usage: torchrun --nproc_per_node=N tests/probes/listing_probe.py URL OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from dali_pipes import compose_config
from dali_pipes.config.specs import loader_spec
from dali_pipes.runtime.distributed import init, ranks, shutdown

url, out = sys.argv[1], Path(sys.argv[2])
rank = ranks().rank
if rank != 0:
    os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # the discard port: refused
    os.environ["AWS_MAX_ATTEMPTS"] = "1"
init(torch.device("cpu"))
spec = loader_spec(compose_config(["data=folder", f"data.root={url}", "backend=torch"]), "train")
(out / f"rank{rank}.json").write_text(json.dumps(list(spec.source.files)))  # type: ignore[attr-defined]
shutdown()  # a process group left to the interpreter's exit can abort it (gloo)
