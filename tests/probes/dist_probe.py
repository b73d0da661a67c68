"""Run under torchrun by tests/e2e/test_train.py: each rank writes the sample ids it read
with each backend named, one after the other in this one launch (a launch costs a process
per rank, each importing torch and DALI), to ``OUT_DIR/<backend>/rank<r>.json``.

Usage: torchrun --nproc_per_node=N tests/probes/dist_probe.py ROOT OUT_DIR BACKEND...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

from conftest import colour_id

from dali_pipes import build_loader, compose_config
from dali_pipes.runtime.distributed import ranks


def shards(root: str, backend: str) -> dict[int, dict[str, object]]:
    """The sample ids this rank reads with ``backend`` and its batch count, per epoch."""
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={root}",
            "data.batch_size=2",
            f"backend={backend}",
            "backend.device=cpu",
            "augment.train.crop.size=16",
            *(["backend.num_workers=0"] if backend == "torch" else []),
        ]
    )
    loader = build_loader(cfg, "train")  # rank and world size come from torchrun's environment
    epochs: dict[int, dict[str, object]] = {}
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        ids = []
        for images, _ in loader:
            rgb = (
                (images * 0.229 + 0.485)[:, 0].mean(dim=(1, 2)) * 255,
                (images * 0.224 + 0.456)[:, 1].mean(dim=(1, 2)) * 255,
            )
            ids += [colour_id(np.array([float(r), float(g)])) for r, g in zip(*rgb, strict=True)]
        epochs[epoch] = {"ids": ids, "batches": len(loader)}
    loader.close()
    return epochs


root, out = sys.argv[1], Path(sys.argv[2])
where = ranks()
for backend in sys.argv[3:]:
    (out / backend).mkdir(parents=True, exist_ok=True)
    (out / backend / f"rank{where.rank}.json").write_text(
        json.dumps({"world": where.world_size, "epochs": shards(root, backend)})
    )
