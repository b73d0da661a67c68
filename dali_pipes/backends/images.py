"""A batch's images, in the three forms a loader hands over: one ``[N, 3, H, W]`` tensor,
a list of such tensors (one per view of a split with views), or an :class:`ImageList` (one
``[3, H, W]`` tensor per sample, when each keeps a size of its own); and the helpers that
treat the three alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


class ImageList(list[torch.Tensor]):
    """A batch's images when each has a size of its own (a crop that
    :meth:`~dali_pipes.augment.base.CropOp.varies_in_size`): one ``[3, H, W]`` tensor per
    sample, as torchvision's detection models take them. A list, told from a list of views
    by its type."""


#: A batch's images: one ``[N, 3, H, W]`` tensor (``[N, 1, H, W]`` with
#: ``augment.channels=1``, :func:`first_channel`), for a split with views
#: (:mod:`dali_pipes.augment.views`) a list of them, one per view, in the configured order,
#: or for images of their own sizes an :class:`ImageList`.
Images = torch.Tensor | list[torch.Tensor]


def has_views(images: Images) -> bool:
    """Whether a batch's (or one sample's) images are views, one tensor each, rather than
    one tensor: the one place a batch with views is told from a plain one (or from an
    :class:`ImageList`)."""
    return isinstance(images, list) and not isinstance(images, ImageList)


def views_of(images: Images) -> list[torch.Tensor]:
    """A batch's images as a list of tensors: each view's, the one of a plain split, or
    each sample's of an :class:`ImageList`."""
    return images if isinstance(images, list) else [images]


def each_view(fn: Callable[[torch.Tensor], torch.Tensor], images: Images) -> Images:
    """``fn`` applied to a batch's images, or to each view's tensor; on an
    :class:`ImageList`, to each sample's as a batch of one."""
    if isinstance(images, ImageList):
        return ImageList(fn(image[None])[0] for image in images)
    return [fn(view) for view in images] if isinstance(images, list) else fn(images)


def stack_samples(samples: Sequence[Images], own_sizes: bool = False) -> Images:
    """Samples' images (each ``[3, H, W]``, or a list of views) as one batch: one
    ``[N, 3, H, W]`` tensor, for views a list with one such tensor per view, and with
    ``own_sizes`` (images of sizes of their own) an :class:`ImageList`."""
    if own_sizes:
        return ImageList(views_of(s)[0] for s in samples)
    if not samples:
        return torch.empty(0, dtype=torch.uint8)
    if isinstance(samples[0], list):
        per_sample = [views_of(s) for s in samples]
        return [torch.stack([views[v] for views in per_sample]) for v in range(len(per_sample[0]))]
    return torch.stack([views_of(s)[0] for s in samples])


def first_channel(images: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """A grey batch (``augment.channels=1``) as ``[N, 1, H, W]``: the first of the three
    equal channels it was made with, in the batch's memory format."""
    layout = torch.channels_last if channels_last else torch.contiguous_format
    return images[:, :1].contiguous(memory_format=layout)
