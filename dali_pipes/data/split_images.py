"""The image side of a split whose samples carry targets (COCO's objects, segmentation
masks): its images are an image folder's reading, and the source interface's image
members hand over to it, so a source with targets adds only its targets."""

from __future__ import annotations

import numpy as np

from dali_pipes.data.interface import Indices, SampleStat
from dali_pipes.data.sources import FolderSource
from dali_pipes.image.decode import Blob


class SplitImages:
    """The :class:`~dali_pipes.data.interface.Source` members of a split with targets,
    read from its ``images`` (labels 0: an image as a whole has no class here)."""

    images: FolderSource

    def __len__(self) -> int:
        return len(self.images)

    @property
    def root(self) -> str:
        """The split's image folder."""
        return self.images.root

    @property
    def files(self) -> tuple[str, ...]:
        """Each image's path."""
        return self.images.files

    @property
    def labels(self) -> np.ndarray:
        """0 for every image: its targets have the classes."""
        return self.images.labels

    @property
    def read_timeout(self) -> float | None:
        """Seconds an image's read may take before it is a bad sample."""
        return self.images.read_timeout

    def read(self, indices: Indices) -> list[Blob]:
        """Each image's encoded bytes, or the error naming it."""
        return self.images.read(indices)

    def identity(self, indices: Indices) -> np.ndarray:
        """What each sample's augmentation is drawn from: its index in the split."""
        return self.images.identity(indices)

    def name(self, index: int) -> str:
        """The image's path."""
        return self.images.name(index)

    def local_paths(self) -> tuple[str, ...] | None:
        """The image files, when they are local files."""
        return self.images.local_paths()

    def stats(self) -> list[SampleStat]:
        """Size and version of each image file."""
        return self.images.stats()
