"""Several views of each sample (self-supervised recipes: SimCLR, BYOL, DINO, SwAV).

A split with ``views`` makes, from one decode of each image, one crop per view, each view
with a crop and ops of its own. The views come in named groups, in the configured order
(DINO's globals, then its locals); a group makes ``count`` views alike in their pipeline
and different in their draws. Each group starts from the split's ``crop`` and ``ops`` and
changes what it names: a crop parameter, an op's parameter, an op removed (``null``) or
added (it goes last), so what all views share is written once::

    crop: {op: random_resized_crop, size: 224, scale: [0.4, 1.0]}
    ops: {hflip: {p: 0.5}, gaussian_blur: {p: 1.0}}
    views:
      global1: {}
      global2: {ops: {gaussian_blur: {p: 0.1}, solarize: {p: 0.2}}}
      local: {count: 8, crop: {size: 96, scale: [0.05, 0.4]}, ops: {gaussian_blur: {p: 0.5}}}

View ``v`` (counted over all groups) draws its parameters from its own counters of the
keyed hash (:data:`~dali_pipes.augment.keyed.VIEW_COUNTERS`): a pure function of (seed,
epoch, sample, view), the same in every backend, so parity, ``set_epoch``, sharding,
resume and replay hold per view. A batch holds the views as a list of ``[N, 3, H, W]``
tensors in this order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from numpy.typing import ArrayLike

from dali_pipes.augment.base import Op
from dali_pipes.augment.pipeline import Draw, Pipeline, parse_pipeline
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.errors import ConfigError, require

#: The keys of a view group.
GROUP_KEYS = ("count", "crop", "ops")


@dataclass(frozen=True)
class ViewGroup:
    """``count`` views made by ``pipeline``, named ``name`` in the config."""

    name: str
    count: int
    pipeline: Pipeline


@dataclass(frozen=True)
class Views:
    """A split's views: its groups in order (one group of one view for a plain split)."""

    groups: tuple[ViewGroup, ...]

    @cached_property
    def pipelines(self) -> tuple[Pipeline, ...]:
        """One pipeline per view, in batch order."""
        return tuple(g.pipeline for g in self.groups for _ in range(g.count))

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Each view's name: its group's, numbered within a group of several."""
        return tuple(
            g.name if g.count == 1 else f"{g.name}{k + 1}"
            for g in self.groups
            for k in range(g.count)
        )

    def __len__(self) -> int:
        return len(self.pipelines)

    @property
    def ops(self) -> tuple[Op, ...]:
        """Every view's ops (an op of several views once per view)."""
        return tuple(op for p in self.pipelines for op in p.ops)

    @property
    def cubic(self) -> bool:
        """Whether a view's crop resizes with the bicubic filter."""
        return any(p.crop.interpolation == "bicubic" for p in self.pipelines)

    def pad_fill(self) -> tuple[int, int, int] | None:
        """The colour a window reaching past the image is padded with (None: no view's
        crop pads; :meth:`~dali_pipes.augment.base.CropOp.pad_fill`). The views of an image
        are cut from one decode, padded once, so the views that pad share one colour
        (:func:`parse_views` refuses others)."""
        fills = {fill for p in self.pipelines if (fill := p.crop.pad_fill()) is not None}
        if len(fills) > 1:
            raise ConfigError(
                f"the views {', '.join(self.names)} pad their crops with different fill "
                f"colours {sorted(fills)}; the views of an image are cut from one decode: "
                "give their crops one fill"
            )
        return next(iter(fills), None)

    def sizes(self, epoch: int = 0) -> tuple[tuple[int, int], ...]:
        """(height, width) of each view in ``epoch``."""
        return tuple(p.size(epoch) for p in self.pipelines)

    def draw(
        self, sizes: ArrayLike, ids: ArrayLike, seed: int, epoch: int, boxes: Boxes | None = None
    ) -> tuple[Draw, ...]:
        """Every view's parameters for images of ``sizes``, sample ids ``ids`` (holding
        ``boxes``, for a crop placed by them)."""
        return tuple(
            p.draw(sizes, ids, seed, epoch, view=v, boxes=boxes)
            for v, p in enumerate(self.pipelines)
        )


def single(pipeline: Pipeline) -> Views:
    """A plain split's pipeline as its one view."""
    return Views((ViewGroup("image", 1, pipeline),))


def parse_views(base: Pipeline, views: Any, key: str) -> tuple[Views, dict[str, Any]]:
    """A split's :class:`Views` from its ``views`` node (``key``: the split's config key),
    each group over ``base`` (the split's crop and ops); and the node in canonical form
    (every group's ``count`` given). A group set to ``null`` is left out; a count of 0 is
    allowed (DINO without local crops), no view at all is not."""
    if not isinstance(views, Mapping) or not views:
        raise ConfigError(
            f"{key}.views={views!r} is invalid: expected a mapping of view group -> "
            "{count, crop, ops}"
        )
    crop, ops = base.config()
    groups: list[ViewGroup] = []
    canonical: dict[str, Any] = {}
    for name, node in views.items():
        where = f"{key}.views.{name}"
        if node is None:
            canonical[str(name)] = None
            continue
        group = _group(node, where)
        pipeline = parse_pipeline(
            _merged(crop, group["crop"]),
            _merged_ops(ops, group["ops"], f"{where}.ops"),
            where,
        )
        groups.append(ViewGroup(str(name), group["count"], pipeline))
        canonical[str(name)] = group
    if not any(g.count for g in groups):
        raise ConfigError(f"{key}.views makes no view: give a group a count of 1 or more")
    made = Views(tuple(g for g in groups if g.count))
    made.pad_fill()  # one padding colour for the one decode
    for pipeline in made.pipelines:
        if pipeline.crop.pads_past_resize:
            raise ConfigError(
                f"{key}.views: the {pipeline.crop.name} crop pads past its resized image, "
                "which the views of an image, cut from one decode, cannot; use one view"
            )
    return made, canonical


def _group(node: Any, where: str) -> dict[str, Any]:
    """A group's node as a dict of :data:`GROUP_KEYS` (count 1, no changes by default)."""
    if not isinstance(node, Mapping):
        raise ConfigError(f"{where}={node!r} is invalid: expected {{count, crop, ops}}")
    unknown = sorted(str(k) for k in node if k not in GROUP_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]} is not a key of a view group; its keys are "
            f"{', '.join(GROUP_KEYS)}"
        )
    count = node.get("count", 1)
    ok = isinstance(count, int) and not isinstance(count, bool) and count >= 0
    require(ok, f"{where}.count", count, "expected an integer >= 0")
    changes = {part: _mapping(node.get(part), f"{where}.{part}") for part in ("crop", "ops")}
    return {"count": count, **changes}


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}={value!r} is invalid: expected a mapping of changes")
    return {str(k): (dict(v) if isinstance(v, Mapping) else v) for k, v in value.items()}


def _merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` (an op's parameters with ``op``) with ``changes``; another ``op`` in
    ``changes`` replaces ``base`` whole."""
    if "op" in changes and changes["op"] != base.get("op"):
        return dict(changes)
    return {**base, **changes}


def _merged_ops(
    base: dict[str, dict[str, Any]], changes: dict[str, Any], where: str
) -> dict[str, Any]:
    """The split's ops with a group's changes: a label set to ``null`` removed, a known
    label's parameters changed, a new label added last."""
    ops: dict[str, Any] = {label: dict(params) for label, params in base.items()}
    for label, change in changes.items():
        if change is None:
            ops.pop(label, None)
        elif not isinstance(change, Mapping):
            raise ConfigError(f"{where}.{label}={change!r} is invalid: expected its parameters")
        elif label in ops:
            ops[label] = _merged(ops[label], dict(change))
        else:
            ops[label] = dict(change)
    return ops
