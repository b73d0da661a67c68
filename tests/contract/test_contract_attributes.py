"""DataLoader's public attributes, checked on a real DataLoader (the reference) and on every
backend: what training code reads of a loader (torchvision's ``evaluate`` takes
``len(loader.dataset)``, Accelerate's ``skip_first_batches`` rebuilds a ``DataLoader`` from
``dataset``, ``batch_sampler`` and ``collate_fn``, loops call ``loader.sampler.set_epoch``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from test_contract import IDENTIFIABLE, KINDS, epoch_ids, make
from torch.utils.data import DataLoader, DistributedSampler
from torchvision.datasets import ImageFolder


def subject(loader: Any) -> Any:
    """The object a training script holds: the reference's real DataLoader, or our loader."""
    return getattr(loader, "loader", loader)


@pytest.mark.parametrize("train", [True, False], ids=["train", "val"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_dataset_is_sized_like_the_split_with_image_folders_attributes(
    kind: str, train: bool, identity_tree: Path
) -> None:
    dataset = subject(make(kind, identity_tree, train=train)).dataset
    folder = ImageFolder(str(identity_tree))
    assert len(dataset) == len(folder)
    assert list(dataset.classes) == folder.classes
    assert dict(dataset.class_to_idx) == folder.class_to_idx
    assert [(str(p), int(t)) for p, t in dataset.samples] == folder.samples
    assert list(dataset.imgs) == list(dataset.samples)
    assert list(dataset.targets) == folder.targets
    if kind != "synthetic":
        _, label = dataset[len(folder) - 1]
        assert label == folder.targets[-1]


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_batch_size_drop_last_and_the_sampler_are_distributed_samplers(
    kind: str, drop_last: bool, identity_tree: Path
) -> None:
    """Rank 1 of 3: ``len(sampler)`` is this rank's samples, iterating it gives them for
    the epoch ``sampler.set_epoch`` chose, and that epoch is the one the loader runs."""
    loader = make(kind, identity_tree, drop_last=drop_last, rank=1, world_size=3, seed=4)
    held = subject(loader)
    folder = ImageFolder(str(identity_tree))
    expected: DistributedSampler[Any] = DistributedSampler(
        folder, num_replicas=3, rank=1, shuffle=True, seed=4, drop_last=drop_last
    )
    assert held.batch_size == 4 and held.drop_last == drop_last
    assert len(held.sampler) == len(expected)
    for epoch in (3, 1):
        held.sampler.set_epoch(epoch)
        expected.set_epoch(epoch)
        assert list(held.sampler) == list(expected)
    assert len(held.batch_sampler) == len(held) == len(loader)


@pytest.mark.parametrize("kind", IDENTIFIABLE)
def test_the_sampler_set_epoch_is_the_loaders(kind: str, identity_tree: Path) -> None:
    loader = make(kind, identity_tree, seed=2)
    held = subject(loader)
    reference = make("reference", identity_tree, seed=2)
    held.sampler.set_epoch(5)
    reference.set_epoch(5)
    assert epoch_ids(held, "imagenet") == epoch_ids(reference, "imagenet")


@pytest.mark.parametrize("kind", KINDS)
def test_a_dataloader_rebuilt_from_the_attributes_yields_the_loaders_batches(
    kind: str, identity_tree: Path
) -> None:
    """What Accelerate's ``skip_first_batches`` builds: ``DataLoader(dataset,
    batch_sampler=..., collate_fn=..., num_workers=..., pin_memory=...)``."""
    held = subject(make(kind, identity_tree, train=False))
    assert isinstance(held.num_workers, int) and isinstance(held.pin_memory, bool)
    assert callable(held.collate_fn)
    own = [(x.cpu(), y.cpu()) for x, y in held]
    rebuilt = DataLoader(
        held.dataset,
        batch_sampler=held.batch_sampler,
        collate_fn=held.collate_fn,
        num_workers=held.num_workers,
        pin_memory=held.pin_memory,
    )
    again = [(x.cpu(), y.cpu()) for x, y in rebuilt]
    assert len(again) == len(own) == len(rebuilt)
    for (a, la), (b, lb) in zip(own, again, strict=True):
        assert torch.equal(la, lb) and torch.equal(a, b)
