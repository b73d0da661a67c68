"""What a detection or segmentation sample carries besides its image.

A source whose samples have targets offers the
:class:`~dali_pipes.data.interface.Annotated` capability: ``targets(index)`` gives one
sample's :class:`SampleTargets`, in the pixels of its source image (before any crop), so
the augmentation moves them with the image from the same drawn parameters
(:mod:`dali_pipes.augment.targets`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class SampleTargets:
    """One sample's objects: boxes (XYXY, float32 ``[K, 4]``, source pixels) with their
    contiguous labels (int64 ``[K]``, 0 is the background), its instance masks (uint8
    ``[K, H, W]``, when asked for), or its semantic mask (uint8 ``[H, W]``: a class per
    pixel). ``image_id`` names the image as its annotations do (COCO's image id)."""

    image_id: int
    boxes: np.ndarray
    labels: np.ndarray
    masks: np.ndarray | None = None
    semantic: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.boxes.shape != (len(self.labels), 4):
            raise ValueError(
                f"image {self.image_id}: boxes of shape {self.boxes.shape} for "
                f"{len(self.labels)} labels; expected [K, 4]"
            )
        if self.masks is not None and len(self.masks) != len(self.labels):
            raise ValueError(
                f"image {self.image_id}: {len(self.masks)} masks for {len(self.labels)} objects"
            )

    @property
    def count(self) -> int:
        """How many objects the sample has (0: an image with none, kept as it is)."""
        return len(self.labels)


def empty_targets(image_id: int) -> SampleTargets:
    """The targets of an image with no objects."""
    return SampleTargets(image_id, np.zeros((0, 4), np.float32), np.zeros(0, np.int64))
