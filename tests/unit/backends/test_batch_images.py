"""A batch's images: one tensor for a plain split, a list of tensors (one per view) for a
split with views; the rule that tells them apart and stacks samples lives in one place."""

from __future__ import annotations

import torch

from dali_pipes.backends.base import each_view, has_views, stack_samples, views_of


def test_plain_samples_stack_into_one_tensor_in_their_order() -> None:
    samples = [torch.full((3, 4, 5), i, dtype=torch.uint8) for i in range(3)]
    images = stack_samples(samples)
    assert not has_views(images)
    assert isinstance(images, torch.Tensor) and images.shape == (3, 3, 4, 5)
    assert images[:, 0, 0, 0].tolist() == [0, 1, 2]
    assert views_of(images)[0] is images


def test_samples_with_views_stack_into_one_tensor_per_view_each_its_own_size() -> None:
    samples = [
        [
            torch.full((3, 8, 8), i, dtype=torch.uint8),
            torch.full((3, 4, 4), 10 + i, dtype=torch.uint8),
        ]
        for i in range(2)
    ]
    images = stack_samples(samples)
    assert has_views(images)
    first, second = views_of(images)
    assert first.shape == (2, 3, 8, 8) and second.shape == (2, 3, 4, 4)
    assert first[:, 0, 0, 0].tolist() == [0, 1] and second[:, 0, 0, 0].tolist() == [10, 11]
    doubled = each_view(lambda view: view * 2, images)
    assert [v[:, 0, 0, 0].tolist() for v in views_of(doubled)] == [[0, 2], [20, 22]]


def test_no_samples_is_an_empty_batch() -> None:
    assert stack_samples([]).numel() == 0  # type: ignore[union-attr]
