"""Batches taken from a loader and compared exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def copied(images: Any) -> Any:
    """A batch's images copied: one tensor, or a split with views' list of tensors."""
    if isinstance(images, (list, tuple)):
        return [view.clone() for view in images]
    return images.clone()


def equal(a: Any, b: Any) -> bool:
    """Images equal exactly: tensors, or lists of views (as many, each equal)."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        )
    return torch.equal(a, b)


def batches(loader: Any, k: int | None = None) -> list[tuple[Any, torch.Tensor]]:
    """The next ``k`` batches of a fresh ``iter`` (None: the rest of the epoch), copied
    (a split with views: each batch's list of views)."""
    out = []
    for images, labels in loader:
        out.append((copied(images), labels.clone()))
        if k is not None and len(out) == k:
            break
    return out


def assert_same(a: list[Any], b: list[Any]) -> None:
    """The same number of batches, each with equal images and labels (and at least one)."""
    assert len(a) == len(b) > 0
    for (xa, la), (xb, lb) in zip(a, b, strict=True):
        assert equal(xa, xb) and torch.equal(la, lb)


def lazy(kind: str) -> list[str]:
    """Overrides under which a loader of backend ``kind`` reads a batch's files only when
    that batch is asked for (no workers, no read-ahead): a fault injected after the first
    batch meets the reads of the next ones."""
    if kind.startswith("torch"):
        return ["backend.num_workers=0"]
    return ["backend.read_ahead=0", "backend.prefetch_queue_depth=1"]


def epoch_with(loader: Any, fault: Callable[[], object]) -> list[tuple[Any, torch.Tensor]]:
    """A whole epoch's batches, copied, with ``fault()`` called once the first batch has
    come (something going wrong mid-epoch)."""
    it = iter(loader)
    images, labels = next(it)
    out = [(copied(images), labels.clone())]
    fault()
    out += [(copied(x), y.clone()) for x, y in it]
    return out
