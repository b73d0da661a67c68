"""Batches taken from a loader and compared exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def batches(loader: Any, k: int | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The next ``k`` batches of a fresh ``iter`` (None: the rest of the epoch), copied."""
    out = []
    for images, labels in loader:
        out.append((images.clone(), labels.clone()))
        if k is not None and len(out) == k:
            break
    return out


def assert_same(a: list[Any], b: list[Any]) -> None:
    """The same number of batches, each with equal images and labels (and at least one)."""
    assert len(a) == len(b) > 0
    for (xa, la), (xb, lb) in zip(a, b, strict=True):
        assert torch.equal(xa, xb) and torch.equal(la, lb)


def lazy(kind: str) -> list[str]:
    """Overrides under which a loader of backend ``kind`` reads a batch's files only when
    that batch is asked for (no workers, no read-ahead): a fault injected after the first
    batch meets the reads of the next ones."""
    if kind.startswith("torch"):
        return ["backend.num_workers=0"]
    return ["backend.read_ahead=0", "backend.prefetch_queue_depth=1"]


def epoch_with(loader: Any, fault: Callable[[], object]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A whole epoch's batches, copied, with ``fault()`` called once the first batch has
    come (something going wrong mid-epoch)."""
    it = iter(loader)
    images, labels = next(it)
    out = [(images.clone(), labels.clone())]
    fault()
    out += [(x.clone(), y.clone()) for x, y in it]
    return out
