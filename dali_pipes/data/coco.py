"""``data=coco``: images with boxes (and instance masks) in COCO's layout as published.

A split is its image folder (``train2017/``) and its annotations file
(``annotations/instances_train2017.json``). Images are read like an image folder's files
(local or in a bucket), in image-id order as torchvision's ``CocoDetection`` lists them;
each image's annotations become its :class:`~dali_pipes.data.targets.SampleTargets`: boxes
from COCO's ``[x, y, width, height]`` to XYXY, category ids to contiguous labels from 1
(the source's ``classes`` record the mapping: ``classes[label]`` is the category's name),
crowd annotations left out unless ``data.crowd``, and with ``data.masks`` each object's
mask decoded from its polygons or RLE by ``pycocotools`` when it is asked for.

An annotation that names an image the file does not list, a category it does not define,
or a box with no area or outside its image is a one-line error naming the file and the
annotation id. Under ``data.on_error=skip`` or ``drop`` its image stays in the split as a
bad sample: reading it gives that error, so the loaders report it and substitute it
(``skip``) or leave it out of its batch (``drop``), as they do an unreadable image.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from dali_pipes.data.interface import Indices
from dali_pipes.data.policy import OnError
from dali_pipes.data.sources import FolderSource
from dali_pipes.data.specs import CocoData
from dali_pipes.data.split_images import SplitImages
from dali_pipes.data.storage import is_url, join, storage_for
from dali_pipes.data.targets import SampleTargets
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import Blob

#: How far past its image's edge (pixels) a box may reach: COCO's own boxes overshoot by
#: a fraction of a pixel now and then.
EDGE_SLACK = 1.0


@dataclass(frozen=True, eq=False)
class CocoSource(SplitImages):
    """One split of a COCO-layout dataset: its images (an image folder's reading) and each
    image's objects, stored as arrays (compact, and cheap to pickle for workers)."""

    images: FolderSource  # the image files in image-id order, their labels 0
    image_ids: np.ndarray = field(repr=False)  # int64 per image
    heights_widths: np.ndarray = field(repr=False)  # int64 [n, 2] from the annotations file
    boxes: np.ndarray = field(repr=False)  # float32 [A, 4] XYXY, image by image
    box_labels: np.ndarray = field(repr=False)  # int64 [A], contiguous from 1
    starts: np.ndarray = field(repr=False)  # int64 [n + 1]: image i's objects
    #: Each object's COCO segmentation (polygons or RLE); None unless ``data.masks``.
    segmentations: tuple[Any, ...] | None = field(default=None, repr=False)
    category_ids: tuple[int, ...] = ()  # label i is category_ids[i - 1]
    classes: tuple[str, ...] = ()  # "__background__", then the categories' names
    #: Images whose annotations cannot be used (``on_error=skip|drop``): index -> why.
    unusable: dict[int, str] = field(default_factory=dict, repr=False)
    #: The split's annotations file (what a reader of the layout as published opens).
    annotations: str = ""

    task = "detection"
    mask_fill = 0  # past the image, an instance mask has no object

    @property
    def has_masks(self) -> bool:
        """Whether the objects come with instance masks (``data.masks``)."""
        return self.segmentations is not None

    def read(self, indices: Indices) -> list[Blob]:
        """Each image's encoded bytes, or the error naming it (an image whose annotations
        cannot be used gives theirs)."""
        blobs = self.images.read(indices)
        if not self.unusable:
            return blobs
        return [
            DataError(self.unusable[int(i)]) if int(i) in self.unusable else blob
            for i, blob in zip(indices, blobs, strict=True)
        ]

    def local_paths(self) -> tuple[str, ...] | None:
        """The image files, when they are local files and every one's annotations can be
        used (otherwise the files are read through :meth:`read`, which says which not)."""
        return None if self.unusable else self.images.local_paths()

    def targets(self, index: int) -> SampleTargets:
        """Image ``index``'s objects, with their instance masks when ``data.masks``."""
        lo, hi = int(self.starts[index]), int(self.starts[index + 1])
        masks = None
        if self.segmentations is not None:
            h, w = (int(v) for v in self.heights_widths[index])
            masks = decode_masks(self.segmentations[lo:hi], h, w)
        return SampleTargets(
            int(self.image_ids[index]), self.boxes[lo:hi], self.box_labels[lo:hi], masks
        )

    def misfit(self, index: int, size: tuple[int, int]) -> str | None:
        """The image's size against its annotations' (``height``, ``width``), which its
        instance masks are drawn at: with masks they must be equal."""
        h, w = (int(v) for v in self.heights_widths[index])
        if self.segmentations is None or (h, w) == tuple(size):
            return None
        return (
            f"{self.name(index)}: the image is {size[0]}x{size[1]} but its annotations "
            f"(image id {int(self.image_ids[index])} in {self.annotations}) say {h}x{w}, "
            "so its masks do not fit it; fix the annotations or set data.on_error=skip"
        )


def decode_masks(segmentations: tuple[Any, ...], height: int, width: int) -> np.ndarray:
    """uint8 ``[K, height, width]`` masks from COCO segmentations (polygons, RLE)."""
    if not segmentations:
        return np.zeros((0, height, width), np.uint8)
    from pycocotools import mask as coco_mask

    out = np.empty((len(segmentations), height, width), np.uint8)
    for k, segmentation in enumerate(segmentations):
        rle = segmentation
        if isinstance(segmentation, list) or isinstance(segmentation.get("counts"), list):
            rle = coco_mask.merge(_as_list(coco_mask.frPyObjects(segmentation, height, width)))
        out[k] = coco_mask.decode(rle)
    return out


def _as_list(rles: Any) -> list[Any]:
    return rles if isinstance(rles, list) else [rles]


def open_coco(data: CocoData, split: str) -> CocoSource:
    """A split of a COCO-layout dataset, its annotations checked (see the module)."""
    if not data.root:
        raise ConfigError("data.root is not set: pass data.root=/path/to/coco")
    if data.masks:
        require_pycocotools()
    folder = join(data.root, data.train_dir if split == "train" else data.val_dir)
    path = join(data.root, data.train_annotations if split == "train" else data.val_annotations)
    listing = Listing(path, folder, data)
    listing.read(_load_json(path, data.read_timeout))
    return listing.source()


def require_pycocotools() -> None:
    """Refuse in one line when pycocotools, which decodes COCO's masks, is missing."""
    try:
        import pycocotools.mask  # noqa: F401
    except ImportError:
        raise ConfigError(
            "data.masks=true decodes COCO's polygons and RLE with pycocotools, which is not "
            "installed: pip install 'dali_pipes[coco]' (or set data.masks=false)"
        ) from None


def _load_json(path: str, read_timeout: float | None) -> dict[str, Any]:
    """The annotations file, or one line saying what is wrong with it."""
    if not is_url(path):
        from pathlib import Path

        if not Path(path).is_file():
            raise DataError(
                f"{path}: annotations file not found; set data.root to COCO's folder (with "
                "annotations/ and the image folders) or data.*_annotations to the file"
            )
    blob = storage_for(path, read_timeout).read_many([path], read_timeout)[0]
    if isinstance(blob, DataError):
        raise blob
    try:
        content = json.loads(bytes(blob))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a JSON annotations file ({exc}); check the file") from None
    if not isinstance(content, dict) or not isinstance(content.get("images"), list):
        raise DataError(f"{path}: no 'images' list; expected COCO's instances JSON")
    return content


@dataclass
class Listing:
    """The split's images and objects as the annotations file is read and checked."""

    path: str
    folder: str
    data: CocoData
    #: The images in this order (torchvision's ``CocoDetection.ids``); None: by image id.
    order: list[int] | None = None
    #: Labels are the category ids as they are (as torchvision's v2 wrapper of
    #: ``CocoDetection`` gives them); False: contiguous from 1.
    raw_labels: bool = False
    images: dict[int, dict[str, Any]] = field(default_factory=dict)  # by image id
    category_ids: tuple[int, ...] = ()  # sorted: label k + 1 is category_ids[k]
    names: tuple[str, ...] = ()  # the categories' names, in the same order
    objects: dict[int, list[tuple[list[float], int, Any]]] = field(default_factory=dict)
    bad: dict[int, str] = field(default_factory=dict)  # image id -> why it is a bad sample

    @cached_property
    def policy(self) -> OnError:
        return OnError(self.data.on_error)

    def read(self, content: dict[str, Any]) -> None:
        """Take the categories, images and annotations of a parsed annotations file."""
        categories = sorted(content.get("categories") or [], key=lambda c: int(c["id"]))
        self.category_ids = tuple(int(c["id"]) for c in categories)
        self.names = tuple(str(c.get("name", c["id"])) for c in categories)
        label_of = {cid: k + 1 for k, cid in enumerate(self.category_ids)}
        if self.raw_labels:
            label_of = {cid: cid for cid in self.category_ids}
        self.images = {int(i["id"]): i for i in content["images"]}
        for ann in content.get("annotations") or []:
            self._add(ann, label_of)

    def _add(self, ann: dict[str, Any], label_of: dict[int, int]) -> None:
        aid, image_id = ann.get("id"), int(ann.get("image_id", -1))
        where = f"{self.path}: annotation {aid}"
        image = self.images.get(image_id)
        if image is None:
            self._problem(None, f"{where} names image {image_id}, which the file does not list")
            return
        if ann.get("iscrowd") and not self.data.crowd:
            return
        label = label_of.get(int(ann.get("category_id", -1)))
        if label is None:
            why = f"{where} has category {ann.get('category_id')}, which the file does not define"
            self._problem(image_id, why)
            return
        bbox: Any = ann.get("bbox")
        if not _box_fits(bbox, int(image["height"]), int(image["width"])):
            self._problem(image_id, f"{where} has box {bbox}, outside image {image_id} or empty")
            return
        segmentation = ann.get("segmentation") if self.data.masks else None
        self.objects.setdefault(image_id, []).append(
            ([float(v) for v in bbox], label, segmentation)
        )

    def _problem(self, image_id: int | None, why: str) -> None:
        """An annotation that cannot be used: raised under ``raise``; else its image (if
        there is one) becomes a bad sample, with the reason."""
        error = DataError(f"{why}; fix the annotation")
        name = self.path if image_id is None else self._file(image_id)
        self.policy.judge(name, error, lambda _, __: None)
        if image_id is not None and image_id not in self.bad:
            self.bad[image_id] = str(error)

    def _file(self, image_id: int) -> str:
        return join(self.folder, str(self.images[image_id]["file_name"]))

    def classes(self) -> tuple[str, ...]:
        """``classes[label]``: the background, then each label's category name (by
        category id with :attr:`raw_labels`, ``"N/A"`` where no category has the id)."""
        if not self.raw_labels:
            return ("__background__", *self.names)
        top = max(self.category_ids, default=0)
        named = dict(zip(self.category_ids, self.names, strict=True))
        return ("__background__", *(named.get(i, "N/A") for i in range(1, top + 1)))

    def source(self) -> CocoSource:
        """The split as read: its images in order, each one's objects."""
        ids = sorted(self.images) if self.order is None else list(self.order)
        boxes, labels, segmentations, starts = [], [], [], [0]
        for image_id in ids:
            for (x, y, w, h), label, segmentation in self.objects.get(image_id, []):
                boxes.append((x, y, x + w, y + h))
                labels.append(label)
                segmentations.append(segmentation)
            starts.append(len(labels))
        images = FolderSource(
            root=self.folder,
            files=tuple(self._file(i) for i in ids),
            labels=np.zeros(len(ids), np.int64),
            classes=self.classes(),
            read_timeout=self.data.read_timeout,
        )
        return CocoSource(
            images=images,
            image_ids=np.asarray(ids, np.int64),
            heights_widths=np.asarray(
                [(self.images[i]["height"], self.images[i]["width"]) for i in ids], np.int64
            ).reshape(-1, 2),
            boxes=np.asarray(boxes, np.float32).reshape(-1, 4),
            box_labels=np.asarray(labels, np.int64),
            starts=np.asarray(starts, np.int64),
            segmentations=tuple(segmentations) if self.data.masks else None,
            category_ids=self.category_ids,
            classes=images.classes,
            unusable={k: self.bad[i] for k, i in enumerate(ids) if i in self.bad},
            annotations=self.path,
        )


def _box_fits(bbox: Any, height: int, width: int) -> bool:
    """Whether a COCO ``[x, y, w, h]`` box has an area and lies within its image."""
    if not isinstance(bbox, list | tuple) or len(bbox) != 4:
        return False
    try:
        x, y, w, h = (float(v) for v in bbox)
    except (TypeError, ValueError):
        return False
    inside = x >= -EDGE_SLACK and y >= -EDGE_SLACK
    inside = inside and x + w <= width + EDGE_SLACK and y + h <= height + EDGE_SLACK
    return w > 0 and h > 0 and inside
