"""The CPU -> GPU hand-over keeps one CUDA side stream for its loader's whole life.

torch's caching allocator keeps the blocks a stream's work freed for that stream alone,
and each ``torch.cuda.Stream()`` is the next stream of a pool of 32: a side stream made per
epoch left every epoch's batches cached apart, and the torch backend's GPU memory grew by
one working set per epoch (``test_gpu_memory_stays_flat_over_30_epochs[torch]`` on a
GPU). What a CPU can see of that is how many side streams a loader asks for and which one
each epoch copies on; the copy itself is the GPU tests' (CUDA is pretended here, and the
copy step records the stream it is given instead of copying).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import torch
from helpers.launch import GPU0, cuda

from dali_pipes import compose_config
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import handover
from dali_pipes.backends import torch as torch_backend
from dali_pipes.backends.base import Batch
from dali_pipes.config.specs import loader_spec


class _Stream:
    """Stands for a CUDA stream: what the hand-over asked ``torch.cuda.Stream`` for."""

    def __init__(self, device: torch.device) -> None:
        self.device = device


def test_every_epoch_of_a_gpu_bound_torch_loader_copies_on_one_side_stream(
    monkeypatch: pytest.MonkeyPatch, identity_tree: Path
) -> None:
    cuda(monkeypatch, 1)
    made: list[_Stream] = []
    used: list[object] = []

    def stream(device: torch.device) -> _Stream:
        made.append(_Stream(device))
        return made[-1]

    def ahead(self: handover.Handover, batches: Iterable[Batch], side: object) -> Iterator[Batch]:
        used.append(side)
        yield from batches

    class Unnormalised:  # the normalisation's mean and std would be made on the GPU
        def __init__(self, augment: AugmentSpec, device: torch.device) -> None:
            pass

    monkeypatch.setattr(torch.cuda, "Stream", stream)
    monkeypatch.setattr(handover.Handover, "_ahead", ahead)
    monkeypatch.setattr(torch_backend, "Normalizer", Unnormalised)
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            "data.batch_size=4",
            "augment.train.crop.size=16",
            "backend=torch",
            "backend.device=gpu",
            "backend.num_workers=0",
            "backend.pin_memory=false",  # pinning needs a CUDA driver
        ]
    )
    loader = torch_backend.TorchLoader(loader_spec(cfg, "train"))
    assert loader.device == GPU0 and not made, "building a loader touches no stream"
    for epoch in range(4):
        loader.set_epoch(epoch)
        assert sum(len(labels) for _, labels in loader) == 17
    for _ in loader:  # an epoch left after one batch, then a whole one
        break
    assert len(list(loader)) == len(loader)
    assert len(made) == 1 and made[0].device == GPU0
    assert len(used) == 6 and all(side is made[0] for side in used)
    loader.close()
