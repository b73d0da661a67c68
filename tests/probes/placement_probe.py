"""Started by tests/unit/runtime/test_distributed.py in a process of its own, with the
launcher's variables it sets: builds the training loader of the config given on the command
line and prints where the model, the loader and the first batch are, as one JSON line.

It imports dali_pipes from this tree only (its root is put first on the path), nothing of
the tests, so it runs from any working directory and whatever PYTHONPATH holds.

Usage: python tests/probes/placement_probe.py KEY=VALUE ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tree's dali_pipes

from dali_pipes import build_loader, compose_config
from dali_pipes.config.loaders import model_device

cfg = compose_config(sys.argv[1:])
with build_loader(cfg, "train") as loader:
    images, labels = next(iter(loader))
    seen = {"model": str(model_device(cfg)), "loader": str(loader.device)}
print(json.dumps(seen | {"images": str(images.device)}))
