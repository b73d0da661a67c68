"""Run under torchrun by tests/e2e/test_distributed_skip.py: a real Accelerate training run
(gloo, CPU) over a folder with bad files, data.on_error=skip; each rank writes what it saw.

Usage: torchrun --nproc_per_node=2 tests/probes/skip_probe.py ROOT OUT_DIR BACKEND
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from dali_pipes import build_loader, compose_config


def run(acc: Accelerator, root: str, backend: str) -> dict:
    """Two epochs of training and evaluation with ``backend``: what this rank saw."""
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={root}",
            "data.batch_size=4",
            "data.on_error=skip",
            f"backend={backend}",
            "backend.device=cpu",
            "augment.train.crop.size=32",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            "seed=3",
            *(["backend.num_workers=0"] if backend == "torch" else []),
        ]
    )
    train, val = build_loader(cfg, "train"), build_loader(cfg, "val")  # ranks from torchrun
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, stride=4),
        torch.nn.Flatten(),
        torch.nn.LazyLinear(train.num_classes),
    )
    net(torch.zeros(1, 3, 32, 32))
    model, optimizer = acc.prepare(net, torch.optim.SGD(net.parameters(), lr=0.05))
    record: dict = {"rank": acc.process_index, "world": acc.num_processes, "epochs": {}}
    for epoch in (0, 1):
        train.set_epoch(epoch)
        row = {"batches": 0, "samples": 0, "gathered": 0, "val_batches": 0, "val_samples": 0}
        model.train()
        for images, labels in train:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            acc.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            row["batches"] += 1
            row["samples"] += len(labels)
            row["gathered"] += len(acc.gather_for_metrics(labels))
        row["skipped"] = train.skipped
        model.eval()
        correct = torch.zeros((), dtype=torch.int64)
        with torch.no_grad():
            for images, labels in val:
                preds, seen = acc.gather_for_metrics((model(images).argmax(1), labels))
                correct += (preds == seen).sum()
                row["val_batches"] += 1
                row["val_samples"] += len(labels)
                row["val_gathered"] = row.get("val_gathered", 0) + len(seen)
        row["val_skipped"] = val.skipped
        record["epochs"][epoch] = row
    record["train_sampler"], record["val_sampler"] = len(train.sampler), len(val.sampler)
    record["train_len"], record["val_len"] = len(train), len(val)
    record["bad_files"] = sorted({**train.bad_files, **val.bad_files})
    train.close()
    val.close()
    return record


root, out = sys.argv[1], Path(sys.argv[2])
acc = Accelerator(cpu=True)  # under torchrun: one gloo process group over the 2 ranks
for backend in sys.argv[3:]:
    record = run(acc, root, backend)
    acc.wait_for_everyone()
    (out / backend).mkdir(parents=True, exist_ok=True)
    (out / backend / f"rank{acc.process_index}.json").write_text(json.dumps(record))
acc.end_training()
