"""What the feed gives a DALI graph, named once: each column with its DALI type.

A batch reaches the graph through ``external_source`` as a flat tuple of columns; this
module is the one place that says which column is which. :class:`Fed` is a batch's columns
by name (NumPy arrays on the feed's side, DataNodes on the graph's), :class:`FedColumns`
their names and types for a split's pipeline, and both flatten and unflatten in the same
order, so the feed (:mod:`.feed`), the graph (:mod:`.graph`) and the decoded-image cache
(:mod:`dali_pipes.backends.cache.gpu`) cannot disagree on a position.

The columns of a batch: the images (encoded files, or the cache's decoded pixels, which
come through an ``external_source`` of their own), the labels, then one :class:`View` per
crop of each image: its decode window, resize ROI, output size and the ops' parameters.
A pipeline crops each image once today, so there is one view; several views would be
several groups of the same columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

#: A view's geometry columns, in order, with their NumPy dtype; each is ``[n, 2]``.
GEOMETRY = (
    ("anchor", "float32"),  # the decode window's x, y in source pixels ...
    ("shape", "float32"),  # ... and its w, h
    ("roi_start", "float32"),  # the resize ROI (y, x) in window pixels ...
    ("roi_end", "float32"),  # ... and its end
    ("out", "float32"),  # the output size (h, w): fed, so a schedule needs no rebuild
)


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


class Fed(NamedTuple):
    """One batch's columns by name (arrays as fed, or the graph's DataNodes)."""

    images: Any  # encoded files (uint8, one array each) or the cache's pixels (fed apart)
    labels: Any  # int64 [n]
    views: tuple[View, ...]

    def flat(self) -> tuple[Any, ...]:
        """Every column in feed order: images, labels, each view's columns."""
        return (self.images, *self.params())

    def params(self) -> tuple[Any, ...]:
        """The columns after the images: what the cache feeds apart from its pixels."""
        return (self.labels, *(column for view in self.views for column in view.flat()))


@dataclass(frozen=True)
class FedColumns:
    """The columns a split's pipeline is fed, each named, with its NumPy dtype.

    ``params``: each op parameter's (name, dtype) in :meth:`Pipeline.feed` order
    (``<op label>.<parameter>``); ``views``: how many crops each image gives.
    """

    params: tuple[tuple[str, str], ...]
    views: int = 1

    @classmethod
    def of(cls, pipeline: Any) -> FedColumns:
        """The columns of ``pipeline`` (a :class:`~dali_pipes.augment.pipeline.Pipeline`)."""
        labels = pipeline.labels or tuple(op.name for op in pipeline.ops)
        names = [f"{labels[k]}.{name}" for k, name in pipeline.feed_layout]
        return cls(tuple(zip(names, pipeline.feed_dtypes, strict=True)))

    @property
    def per_view(self) -> int:
        """How many columns each view has."""
        return len(GEOMETRY) + len(self.params)

    def columns(self, images: bool = True) -> list[tuple[str, str]]:
        """(name, dtype) of every column in feed order (``images=False``: from the labels
        on, the cache's parameter columns)."""
        view = [*GEOMETRY, *self.params]
        views = [
            (f"{name}[{v}]" if self.views > 1 else name, dtype)
            for v in range(self.views)
            for name, dtype in view
        ]
        return [*([("images", "uint8")] if images else []), ("labels", "int64"), *views]

    def dali_types(self, images: bool = True) -> list[Any]:
        """The DALI type of each column, for ``external_source(dtype=...)``."""
        return [dali_type(dtype) for _, dtype in self.columns(images)]

    def unflatten(self, columns: Sequence[Any], images: Any = None) -> Fed:
        """The :class:`Fed` of ``columns`` in feed order; ``images`` given apart when the
        columns start at the labels (the cache's parameter columns)."""
        rest = list(columns)
        if images is None:
            images = rest.pop(0)
        expected = 1 + self.views * self.per_view
        if len(rest) != expected:
            raise ValueError(f"{len(rest)} columns after the images, expected {expected}")
        n = self.per_view
        views = tuple(_view(rest[1 + v * n : 1 + (v + 1) * n]) for v in range(self.views))
        return Fed(images, rest[0], views)


def _view(columns: Sequence[Any]) -> View:
    """A :class:`View` of its columns in feed order."""
    anchor, shape, roi_start, roi_end, out = columns[: len(GEOMETRY)]
    return View(anchor, shape, roi_start, roi_end, out, tuple(columns[len(GEOMETRY) :]))


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
