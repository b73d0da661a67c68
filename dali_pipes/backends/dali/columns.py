"""What the feed gives a DALI graph, named once: each column with its DALI type.

A batch reaches the graph through ``external_source`` as a flat tuple of columns; this
module is the one place that says which column is which. :class:`Fed` is a batch's columns
by name (NumPy arrays on the feed's side, DataNodes on the graph's), :class:`FedColumns`
their names and types for a split, and both flatten and unflatten in the same order, so
the feed (:mod:`.feed`), the graph (:mod:`.graph`, :mod:`.views`) and the decoded-image
cache (:mod:`dali_pipes.backends.cache.gpu`) cannot disagree on a position.

The columns of a batch: the images (encoded files, or the cache's decoded pixels, which
come through an ``external_source`` of their own), the labels, then one :class:`View` per
crop of each image: its window, resize ROI, output size and the ops' parameters. A plain
split crops each image once: its one view's window is where the image is decoded. A split
with views (:mod:`dali_pipes.augment.views`) decodes each image once, in a shared
:class:`Window` (the smallest region holding every view's window, fed before the views),
and each view's window is then its place in that decoded region.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from dali_pipes.augment.unconverted import unconverted

#: A view's geometry columns, in order, with their NumPy dtype; each is ``[n, 2]``. The
#: window is in source pixels (a plain split: where the image is decoded), or for a split
#: with views in the shared decode window's pixels.
GEOMETRY = (
    ("anchor", "float32"),  # the window's x, y ...
    ("shape", "float32"),  # ... and its w, h
    ("roi_start", "float32"),  # the resize ROI (y, x) in window pixels ...
    ("roi_end", "float32"),  # ... and its end
    ("out", "float32"),  # the output size (h, w): fed, so a schedule needs no rebuild
)

#: The shared decode window's columns of a split with views, before the views: anchor
#: (x, y) and shape (w, h) in source pixels, each ``[n, 2]`` float32.
DECODE = (("decode.anchor", "float32"), ("decode.shape", "float32"))

#: An op parameter's column: (name, NumPy dtype name).
Column = tuple[str, str]

#: The masks' columns of data with masks, after the views: each sample's masks (uint8
#: ``[H, W, K]``: its kept objects', or its one segmentation mask), the crop window (x, y
#: and w, h in source pixels), the ROI their nearest-neighbour resize samples
#: (:meth:`~dali_pipes.augment.geometry.Geometry.nearest_roi`), the size resized to (h, w:
#: the output's part inside the resized window) and the output's size (w, h), ``[n, 2]``
#: each.
MASKS = (
    ("masks", "uint8"),
    ("masks.anchor", "float32"),
    ("masks.shape", "float32"),
    ("masks.roi_start", "float32"),
    ("masks.roi_end", "float32"),
    ("masks.out", "float32"),
    ("masks.size", "float32"),
)

#: A plain split whose crop pads: each window is resized in its band
#: (:mod:`~dali_pipes.augment.geometry_band`), which the view's geometry columns then
#: describe (in the decoded region's pixels); these come last: the region decoded (x, y
#: and w, h in source pixels), where the output starts in the resized band (x, y) and the
#: output's size (w, h), ``[n, 2]`` float32 each.
BAND = tuple((f"band.{name}", "float32") for name in ("region", "region_shape", "place", "size"))


class Window(NamedTuple):
    """A window of each image of a batch: pixel anchor (x, y) and shape (w, h)."""

    anchor: Any
    shape: Any


class View(NamedTuple):
    """One crop of each image of a batch: its geometry and its ops' parameters."""

    anchor: Any
    shape: Any
    roi_start: Any
    roi_end: Any
    out: Any
    params: tuple[Any, ...]  # the ops' parameters, in :meth:`Pipeline.feed` order

    def flat(self) -> tuple[Any, ...]:
        """The view's columns in feed order."""
        return (self.anchor, self.shape, self.roi_start, self.roi_end, self.out, *self.params)


class Masks(NamedTuple):
    """The instance masks of a batch and their geometry (:data:`MASKS`)."""

    masks: Any
    anchor: Any
    shape: Any
    roi_start: Any
    roi_end: Any
    out: Any
    size: Any


class Band(NamedTuple):
    """Where each padded window's band is decoded and placed (:data:`BAND`)."""

    region: Any
    region_shape: Any
    place: Any
    size: Any


class Fed(NamedTuple):
    """One batch's columns by name (arrays as fed, or the graph's DataNodes)."""

    images: Any  # encoded files (uint8, one array each) or the cache's pixels (fed apart)
    labels: Any  # int64 [n]
    views: tuple[View, ...]
    #: A split with views: where each image is decoded, every view's window inside it
    #: (None: a plain split, decoded in its one view's window).
    decode: Window | None = None
    #: Data with instance masks: the masks' columns (None: none).
    masks: Masks | None = None
    #: Data with targets, on the feed's side only (never a column): the batch's objects
    #: as the hand-over gives them (:class:`~dali_pipes.backends.targets.Moved` each).
    objects: Any = None
    #: A plain split whose crop pads: the bands resized instead of the whole windows.
    band: Band | None = None

    def flat(self) -> tuple[Any, ...]:
        """Every column in feed order: images, labels, the shared decode window (views),
        each view's columns, the masks' columns (data with masks)."""
        return (self.images, *self.params())

    def params(self) -> tuple[Any, ...]:
        """The columns after the images: what the cache feeds apart from its pixels."""
        shared = () if self.decode is None else tuple(self.decode)
        masks = () if self.masks is None else tuple(self.masks)
        band = () if self.band is None else tuple(self.band)
        views = (column for view in self.views for column in view.flat())
        return (self.labels, *shared, *views, *masks, *band)

    def decoded(self) -> Window:
        """Where each image is decoded: the shared window, the band, or the one view's."""
        if self.decode is not None:
            return self.decode
        if self.band is not None:
            return Window(self.band.region, self.band.region_shape)
        return Window(self.views[0].anchor, self.views[0].shape)


@dataclass(frozen=True)
class FedColumns:
    """The columns a split is fed, each named, with its NumPy dtype.

    ``params``: each op parameter's (name, dtype) in :meth:`Pipeline.feed` order
    (``<op label>.<parameter>``); ``views``: how many crops each image gives; ``decode``:
    whether a shared decode window (:data:`DECODE`) comes before the views, whose windows
    then lie in it (a split with views); ``each``: each view's parameters where views
    differ in their ops (by default every view has ``params``; :meth:`of_split` sets it,
    ``params`` then the first view's).
    """

    params: tuple[Column, ...]
    views: int = 1
    decode: bool = False
    each: tuple[tuple[Column, ...], ...] = ()
    #: Whether the instance masks' columns (:data:`MASKS`) come after the views.
    masks: bool = False
    #: Whether the band's columns (:data:`BAND`) come last.
    band: bool = False

    def __post_init__(self) -> None:
        each = self.each or (self.params,) * self.views
        if len(each) != self.views or each[0] != self.params:
            raise ValueError(f"{len(each)} views' parameters for {self.views} views: {self}")
        object.__setattr__(self, "each", each)

    @classmethod
    def of(cls, pipeline: Any) -> FedColumns:
        """The columns of ``pipeline`` (a :class:`~dali_pipes.augment.pipeline.Pipeline`)."""
        return cls(_params(pipeline))

    @classmethod
    def of_split(
        cls, augment: Any, train: bool, masks: bool = False, band: bool = False
    ) -> FedColumns:
        """The columns of a split of ``augment`` (an :class:`~dali_pipes.augment.spec.
        AugmentSpec`): its pipeline's (a plain split), or every view's after the shared
        decode window (a split with views); ``masks``: the data's instance masks after
        them; ``band``: the bands of a plain split whose crop pads, last."""
        each = tuple(_params(p) for p in augment.views(train).pipelines)
        return cls(each[0], len(each), augment.multi_view(train), each, masks, band)

    def columns(self, images: bool = True) -> list[tuple[str, str]]:
        """(name, dtype) of every column in feed order (``images=False``: from the labels
        on, the cache's parameter columns)."""
        views = [
            (f"{name}[{v}]" if self.views > 1 else name, dtype)
            for v, params in enumerate(self.each)
            for name, dtype in (*GEOMETRY, *params)
        ]
        shared = list(DECODE) if self.decode else []
        return [
            *([("images", "uint8")] if images else []),
            ("labels", "int64"),
            *shared,
            *views,
            *(MASKS if self.masks else ()),
            *(BAND if self.band else ()),
        ]

    def dali_types(self, images: bool = True) -> list[Any]:
        """The DALI type of each column, for ``external_source(dtype=...)``."""
        return [dali_type(dtype) for _, dtype in self.columns(images)]

    def unflatten(self, columns: Sequence[Any], images: Any = None) -> Fed:
        """The :class:`Fed` of ``columns`` in feed order; ``images`` given apart when the
        columns start at the labels (the cache's parameter columns)."""
        rest = list(columns)
        if images is None:
            images = rest.pop(0)
        expected = len(self.columns(images=False))
        if len(rest) != expected:
            raise ValueError(f"{len(rest)} columns after the images, expected {expected}")
        at = 1 + (len(DECODE) if self.decode else 0)
        decode = Window(rest[1], rest[2]) if self.decode else None
        views = []
        for params in self.each:
            n = len(GEOMETRY) + len(params)
            views.append(_view(rest[at : at + n]))
            at += n
        masks = Masks(*rest[at : at + len(MASKS)]) if self.masks else None
        at += len(MASKS) if self.masks else 0
        band = Band(*rest[at : at + len(BAND)]) if self.band else None
        return Fed(images, rest[0], tuple(views), decode, masks, band=band)


def banded(augment: Any, train: bool) -> bool:
    """Whether a split's windows are resized in bands (:data:`BAND`): a plain split whose
    crop pads (a split with views cuts its windows from one shared decode)."""
    return not augment.multi_view(train) and augment.views(train).pad_fill() is not None


def _params(pipeline: Any) -> tuple[Column, ...]:
    """``pipeline``'s op parameter columns, named ``<op label>.<parameter>``."""
    labels = pipeline.labels or tuple(op.name for op in pipeline.ops)
    early = pipeline.before_labels or tuple(op.name for op in pipeline.before)
    labels = (*labels, *(f"before.{label}" for label in early))
    names = [f"{labels[k]}.{name}" for k, name in pipeline.feed_layout]
    return tuple(zip(names, pipeline.feed_dtypes, strict=True))


def _view(columns: Sequence[Any]) -> View:
    """A :class:`View` of its columns in feed order."""
    anchor, shape, roi_start, roi_end, out = columns[: len(GEOMETRY)]
    return View(anchor, shape, roi_start, roi_end, out, tuple(columns[len(GEOMETRY) :]))


@unconverted
def dali_type(dtype: str) -> Any:
    """DALI's type for a NumPy dtype name."""
    from nvidia.dali import types

    return {
        "bool": types.BOOL,
        "uint8": types.UINT8,
        "int32": types.INT32,
        "int64": types.INT64,
        "float32": types.FLOAT,
        "float64": types.FLOAT64,
    }[dtype]
