"""Batches taken from a loader and compared exactly."""

from __future__ import annotations

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
