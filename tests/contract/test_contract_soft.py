"""The batch contract with soft targets (``augment=deit``: mixup/cutmix, random erasing).

Labels become float32 ``[N, num_classes]`` rows that sum to 1; everything else in the
contract (shapes, normalisation, ``len``, ``drop_last``, ``set_epoch``, sharding) holds as
with hard labels. The reference is torchvision's own: ``ImageFolder`` + ``DistributedSampler``
+ ``DataLoader`` with v2 ``RandomErasing`` per image and ``MixUp``/``CutMix`` on the
collated batch. Every image is in a class folder of its own, so a target row names the
samples mixed into it (the image's own and its partner's).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.identity import MEAN, SIZE, STD, N
from test_contract import KINDS  # the hard-label suite's kinds
from torch.utils.data import DataLoader, DistributedSampler, default_collate
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from dali_pipes import build_loader, compose_config


class Reference:
    """torchvision's version of the deit preset's data side."""

    def __init__(self, root: Path, batch_size: int, seed: int, rank: int, world: int) -> None:
        per_image = v2.Compose(
            [
                v2.PILToTensor(),
                v2.RandomResizedCrop(SIZE, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.RandAugment(num_ops=2, magnitude=9),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(MEAN, STD),
                v2.RandomErasing(p=0.25, value="random"),
            ]
        )
        self.dataset = ImageFolder(str(root), transform=per_image)
        classes = len(self.dataset.classes)
        mix = v2.RandomChoice(
            [v2.MixUp(alpha=0.8, num_classes=classes), v2.CutMix(num_classes=classes)]
        )
        self.sampler: DistributedSampler[Any] = DistributedSampler(
            self.dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed
        )
        self.loader = DataLoader(
            self.dataset,
            batch_size=batch_size,
            sampler=self.sampler,
            collate_fn=lambda samples: mix(*default_collate(samples)),
        )

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)
        torch.manual_seed(epoch)  # torchvision's transforms draw from the global RNG

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter(self.loader)


def make(
    kind: str, root: Path, *, batch_size: int = 4, seed: int = 0, rank: int = 0, world: int = 1
) -> Any:
    if kind == "reference":
        return Reference(root, batch_size, seed, rank, world)
    backend, _, where = kind.partition("-")
    overrides = [
        "data=folder",
        f"data.root={root}",
        f"data.batch_size={batch_size}",
        f"seed={seed}",
        f"backend={backend}",
        f"backend.device={'gpu' if where == 'gpu' else 'cpu'}",
        "augment=deit",
        f"augment.train.crop.size={SIZE}",
        *(["backend.num_workers=1"] if backend == "torch" else []),
    ]
    return build_loader(compose_config(overrides), "train", rank=rank, world_size=world)


def mixed_samples(targets: torch.Tensor) -> set[int]:
    """The classes (= samples) a batch's target rows give weight to beyond the smoothing."""
    floor = targets.min(dim=1, keepdim=True).values
    return {int(c) for c in torch.nonzero(targets > floor + 1e-6)[:, 1]}


@pytest.mark.parametrize("kind", KINDS)
def test_soft_targets_are_float32_rows_that_sum_to_one_beside_normalised_images(
    kind: str, unique_tree: Path
) -> None:
    loader = make(kind, unique_tree)
    images, targets = next(iter(loader))
    assert images.shape == (4, 3, SIZE, SIZE) and images.dtype == torch.float32
    assert targets.shape == (4, N) and targets.dtype == torch.float32
    assert torch.allclose(targets.sum(dim=1).cpu(), torch.ones(4), atol=1e-5)
    assert bool((targets >= 0).all())
    expected = "cuda" if kind.endswith("gpu") else "cpu"
    assert images.device.type == expected and targets.device.type == expected


@pytest.mark.parametrize("kind", KINDS)
def test_len_and_the_last_partial_batch_are_unchanged_by_the_batch_stage(
    kind: str, unique_tree: Path
) -> None:
    loader = make(kind, unique_tree, batch_size=4)
    sizes = [len(targets) for _, targets in loader]
    assert len(loader) == len(sizes) and sizes == [4, 4, 4, 4, 1]


@pytest.mark.parametrize("world", [1, 3])
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "synthetic"])
def test_every_sample_is_in_the_epochs_targets_whatever_the_world_size(
    kind: str, world: int, unique_tree: Path
) -> None:
    seen: set[int] = set()
    for rank in range(world):
        loader = make(kind, unique_tree, batch_size=2, seed=3, rank=rank, world=world)
        loader.set_epoch(1)
        for _, targets in loader:
            seen |= mixed_samples(targets)
    assert seen == set(range(N))


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "reference"])
def test_set_epoch_makes_the_soft_targets_a_function_of_seed_and_epoch(
    kind: str, unique_tree: Path
) -> None:
    def targets(epoch: int, seed: int = 7) -> list[torch.Tensor]:
        loader = make(kind, unique_tree, seed=seed)
        loader.set_epoch(epoch)
        return [t.cpu() for _, t in loader]

    same = targets(2)
    assert all(torch.equal(a, b) for a, b in zip(same, targets(2), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(same, targets(3), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(same, targets(2, seed=8), strict=True))
