"""``data=segmentation``: images paired with masks that give each pixel's class.

Three layouts under ``root`` are recognised, in this order:

- Pascal VOC: ``JPEGImages/<id>.jpg`` with ``SegmentationClass/<id>.png``, the split's ids
  listed in ``ImageSets/Segmentation/<split>.txt`` (``train``, ``val``);
- ADE20K: ``images/<split>/<name>.jpg`` with ``annotations/<split>/<name>.png``
  (``training``, ``validation``);
- paired folders: ``images/<split>/<name>.<ext>`` with ``masks/<split>/<name>.png``.

A mask is a palette PNG (its indices are the classes, as VOC's) or a grey one (its values
are, as ADE20K's); ``data.ignore_index`` (255, VOC's border) marks pixels to ignore and is
what a crop pads masks with. Masks are read with their images, on the loaders' read
threads; a mask that is missing, unreadable, in colour or of another size than its image
is a bad sample under ``data.on_error`` (one line naming it, or a substitute). ``root``
may be a bucket prefix (``s3://bucket/prefix``), read as image folders are.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from os.path import splitext
from typing import Any

import numpy as np

from dali_pipes.data.sources import FolderSource
from dali_pipes.data.specs import SegmentationData
from dali_pipes.data.split_images import SplitImages
from dali_pipes.data.storage import is_url, join, storage_for
from dali_pipes.data.targets import SampleTargets
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.headers import IMAGE_EXTENSIONS

#: (name, images folder, masks folder) of the folder layouts, per split folder.
LAYOUTS = (("ADE20K", "images", "annotations"), ("paired folders", "images", "masks"))


@dataclass(frozen=True, eq=False)
class SegmentationSource(SplitImages):
    """One split: its images (an image folder's reading) and each image's mask file."""

    images: FolderSource  # the image files, their labels 0
    masks: tuple[str, ...] = field(repr=False)  # each image's mask file
    layout: str = "paired folders"
    ignore_index: int = 255

    task = "segmentation"
    has_masks = True  # one mask per image, moved as the images' masks are

    @property
    def mask_fill(self) -> int:
        """Past the image, a mask's pixels are to be ignored."""
        return self.ignore_index

    @property
    def classes(self) -> tuple[str, ...]:
        """The background, then one per class (``data.num_classes``): a mask's values are
        the classes."""
        return self.images.classes

    def _open(self, index: int) -> Any:
        """Sample ``index``'s mask as a PIL image, not yet decoded; a :class:`DataError`
        naming the file when it cannot be a mask."""
        from PIL import Image, UnidentifiedImageError

        path = self.masks[index]
        (blob,) = self.images.storage.read_many([path], self.read_timeout)
        if isinstance(blob, BaseException):
            raise DataError(f"{path}: cannot read the mask of {self.name(index)} ({blob})")
        try:
            picture = Image.open(io.BytesIO(blob.tobytes()))
        except (UnidentifiedImageError, OSError) as exc:
            raise DataError(f"{path}: not a readable mask ({exc}); replace it") from None
        if picture.mode not in ("P", "L"):
            raise DataError(
                f"{path}: a {picture.mode} mask; masks are palette or grey PNGs whose "
                "values are the classes (0..255): convert it"
            )
        return picture

    def mask(self, index: int) -> np.ndarray:
        """Sample ``index``'s mask, uint8 ``[H, W]``."""
        with self._open(index) as picture:
            try:
                return np.array(picture, dtype=np.uint8)  # a copy: writable
            except OSError as exc:
                path = self.masks[index]
                raise DataError(f"{path}: not a readable mask ({exc}); replace it") from None

    def targets(self, index: int) -> SampleTargets:
        """Image ``index``'s mask as its targets (no boxes)."""
        mask = self.mask(index)
        return SampleTargets(
            index, np.zeros((0, 4), np.float32), np.zeros(0, np.int64), semantic=mask
        )

    def misfit(self, index: int, size: tuple[int, int]) -> str | None:
        """Why the mask cannot go with its image of ``size``: missing, unreadable (decoded
        to find out), in colour, or of another size; None when it fits."""
        try:
            with self._open(index) as picture:
                width, height = picture.size
                picture.load()  # a truncated file fails here, as a bad sample, not later
        except DataError as exc:
            return str(exc)
        except OSError as exc:
            return f"{self.masks[index]}: not a readable mask ({exc}); replace it"
        if (height, width) != tuple(size):
            return (
                f"{self.masks[index]}: a {height}x{width} mask for the {size[0]}x{size[1]} "
                f"image {self.name(index)}; fix the mask or set data.on_error=skip"
            )
        return None


def open_segmentation(data: SegmentationData, split: str) -> SegmentationSource:
    """A split of a segmentation dataset, local or in a bucket (``s3://...``), its layout
    recognised (see the module)."""
    if not data.root:
        raise ConfigError("data.root is not set: pass data.root=/path/to/dataset")
    name = data.train_split if split == "train" else data.val_split
    found = _voc(data, name) or _folders(data, name)
    if found is None:
        raise ConfigError(
            f"data.root={data.root}: no segmentation layout for split {name!r}: expected "
            f"images/{name}/ with masks/{name}/ or annotations/{name}/, or Pascal VOC's "
            f"JPEGImages/, SegmentationClass/ and ImageSets/Segmentation/{name}.txt"
        )
    layout, folder, images, masks = found
    if not images:
        raise ConfigError(f"{folder}: no images for split {name!r}; check data.root")
    source = FolderSource(
        root=folder,
        files=tuple(images),
        labels=np.zeros(len(images), np.int64),
        classes=class_names(data.num_classes),
        read_timeout=data.read_timeout,
    )
    return SegmentationSource(source, tuple(masks), layout, data.ignore_index)


def class_names(count: int | None) -> tuple[str, ...]:
    """The classes of masks holding ``count`` of them: the background, then ``class 1``
    and on (None: the background alone; the values are still the classes)."""
    return ("__background__", *(f"class {k}" for k in range(1, count or 1)))


def _names(folder: str) -> list[str] | None:
    """The file names directly in ``folder`` (local or a bucket prefix), sorted; None when
    there is no such folder."""
    if is_url(folder):
        from dali_pipes.data.s3 import list_objects

        keys = [item["Key"] for item in list_objects(folder, recursive=False)]
        return sorted(key.rsplit("/", 1)[-1] for key in keys) or None
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else None


def _voc(data: SegmentationData, split: str) -> tuple[str, str, list[str], list[str]] | None:
    assert data.root is not None
    listing = join(data.root, "ImageSets", "Segmentation", f"{split}.txt")
    names = _names(join(data.root, "ImageSets", "Segmentation"))
    if names is None or f"{split}.txt" not in names:
        return None
    (blob,) = storage_for(listing, data.read_timeout).read_many([listing], data.read_timeout)
    if isinstance(blob, BaseException):
        raise DataError(f"{listing}: cannot read the split's list ({blob})")
    ids = [line.strip() for line in blob.tobytes().decode().splitlines() if line.strip()]
    folder = join(data.root, "JPEGImages")
    images = [join(folder, f"{i}.jpg") for i in ids]
    masks = [join(data.root, "SegmentationClass", f"{i}.png") for i in ids]
    return "Pascal VOC", folder, images, masks


def _folders(data: SegmentationData, split: str) -> tuple[str, str, list[str], list[str]] | None:
    assert data.root is not None
    for layout, image_dir, mask_dir in LAYOUTS:
        folder = join(data.root, image_dir, split)
        names = _names(folder)
        if names is None or _names(join(data.root, mask_dir, split)) is None:
            continue
        kept = [n for n in names if splitext(n)[1].lower().lstrip(".") in _EXTENSIONS]
        images = [join(folder, n) for n in kept]
        masks = [join(data.root, mask_dir, split, splitext(n)[0] + ".png") for n in kept]
        return layout, folder, images, masks
    return None


_EXTENSIONS = {ext.lower().lstrip(".") for ext in IMAGE_EXTENSIONS}
