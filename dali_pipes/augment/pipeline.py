"""A split's augmentation as data: the decode-fused crop, then ops in order.

:meth:`Pipeline.draw` computes every random parameter of a batch in NumPy from the
counter-based hash of (seed, epoch, sample): the crop takes the first counters, each op
the next :meth:`~dali_pipes.augment.base.Op.draws` ones. Every backend realises the same
:class:`Draw` -- the torch backend per sample (:meth:`Pipeline.apply_torch`), DALI as one
graph fed through ``external_source`` (:meth:`Pipeline.feed`, :meth:`Pipeline.dali`) -- so
parity, determinism, sharding and mid-epoch resume hold for any op list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike

from dali_pipes.augment import dali_ops
from dali_pipes.augment.base import Context, CropOp, Op, Params, build_op
from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.keyed import VIEW_COUNTERS, uniforms
from dali_pipes.augment.ops.flip import HorizontalFlip
from dali_pipes.augment.targets.boxes import Boxes, sanitized, through_geometry
from dali_pipes.augment.targets.masks_torch import mask_row
from dali_pipes.errors import ConfigError


@dataclass(frozen=True)
class Draw:
    """One batch's random parameters: the crop's geometry and each op's parameters."""

    geometry: Geometry
    params: tuple[Params, ...]

    def row(self, op: int, j: int) -> dict[str, Any]:
        """Op ``op``'s parameters for sample ``j``."""
        return {name: values[j] for name, values in self.params[op].items()}


@dataclass(frozen=True)
class Pipeline:
    """The crop, then ``ops`` in order; ``labels`` are the ops' keys in the config.

    ``before``: colour ops run on the whole decoded image before the crop, as a torchvision
    pipeline that distorts colours first runs them (SSD's reference: its contrast uses the
    whole image's mean, and a zoom out's fill is not distorted); ``before_labels`` their
    keys. They draw after ``ops`` (so a pipeline without them draws as before), and the
    image is then decoded whole. Their parameters follow the ops' in a :class:`Draw`.
    """

    crop: CropOp
    ops: tuple[Op, ...] = ()
    labels: tuple[str, ...] = ()
    before: tuple[Op, ...] = ()
    before_labels: tuple[str, ...] = ()

    @property
    def every_op(self) -> tuple[Op, ...]:
        """The ops, then the ops before the crop: the order of a :class:`Draw`'s params."""
        return self.ops + self.before

    def config(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The canonical config form, (crop, ops): every parameter given, ``op`` named.

        Two configs that build the same pipeline have the same canonical form."""
        labels = self.labels or tuple(op.name for op in self.ops)
        return {"op": self.crop.name, **asdict(self.crop)}, _configs(labels, self.ops)  # type: ignore[call-overload]

    def before_config(self) -> dict[str, dict[str, Any]]:
        """The ops before the crop in canonical config form."""
        return _configs(self.before_labels or tuple(op.name for op in self.before), self.before)

    def size(self, epoch: int = 0) -> tuple[int, int]:
        """(height, width) of the crop's output in ``epoch``: what every op sees, what a
        batch holds."""
        return self.crop.shape_at(epoch)

    def draw(
        self,
        sizes: ArrayLike,
        ids: ArrayLike,
        seed: int,
        epoch: int,
        view: int = 0,
        boxes: Boxes | None = None,
    ) -> Draw:
        """Parameters for images of ``sizes`` ([B, 2] height, width), sample ids ``ids``;
        ``view``: which view of each sample this pipeline makes (its own counters);
        ``boxes``: the samples' boxes, for a crop that places itself by them (none given:
        no sample has a box)."""
        hw = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)
        samples = np.asarray(ids, dtype=np.int64).reshape(-1)
        first = view * VIEW_COUNTERS
        offset = first + self.crop.draws()
        u = uniforms(seed, epoch, samples, offset - first, first)
        if self.crop.needs_boxes:
            around = boxes if boxes is not None else Boxes.empty(len(hw))
            geometry = self.crop.plan_around(hw, u, epoch, around)
        else:
            geometry = self.crop.plan(hw, u, epoch)
        ctx = Context(size=geometry.out, sizes=geometry.outs)
        params = []
        for op in self.every_op:
            n = op.draws()
            params.append(op.sample(uniforms(seed, epoch, samples, n, offset), ctx))
            offset += n
        return Draw(geometry, tuple(params))

    # ----------------------------------------------------------------- torch

    def apply_torch(self, image: torch.Tensor, draw: Draw, j: int) -> torch.Tensor:
        """The ops on sample ``j`` of ``draw``, a uint8 ``[3, H, W]`` crop (geometry done)."""
        ctx = Context(size=draw.geometry.out, sizes=draw.geometry.outs)
        for k, op in enumerate(self.ops):
            image = op.torch(image, draw.row(k, j), ctx)
        return image

    def apply_before_torch(self, image: torch.Tensor, draw: Draw, j: int) -> torch.Tensor:
        """The ops before the crop on sample ``j``'s whole decoded uint8 ``[3, H, W]``."""
        ctx = Context(size=(int(image.shape[-2]), int(image.shape[-1])))
        for k, op in enumerate(self.before, start=len(self.ops)):
            image = op.torch(image, draw.row(k, j), ctx)
        return image

    def torchvision(self) -> list[Any]:
        """The same pipeline as torchvision v2 transforms (what a user would write): the
        ops before the crop, the crop, the ops."""
        early = [op.torchvision() for op in self.before]
        return [*early, self.crop.torchvision(), *(op.torchvision() for op in self.ops)]

    @cached_property
    def targets(self) -> Targets:
        """How this pipeline moves boxes and masks; refused in one line naming an op
        that cannot move them."""
        return Targets(self)

    # ----------------------------------------------------------------- DALI

    @cached_property
    def fused_flip(self) -> int | None:
        """Index of a horizontal flip that DALI may apply last, in ``crop_mirror_normalize``:
        the last flip when only pointwise ops follow it (they commute with it exactly)."""
        for k in range(len(self.ops) - 1, -1, -1):
            op = self.ops[k]
            if isinstance(op, HorizontalFlip):
                return k
            if not op.pointwise:
                return None
        return None

    @cached_property
    def _probe(self) -> Draw:
        """One sample's parameters: their names and dtypes are fixed by the op list."""
        return self.draw([self.size()], [0], seed=0, epoch=0)

    @cached_property
    def feed_layout(self) -> tuple[tuple[int, str], ...]:
        """(op index, parameter name) of each array :meth:`feed` returns, in order."""
        params = self._probe.params
        return tuple(
            (k, name)
            for k, (op, p) in enumerate(zip(self.every_op, params, strict=True))
            for name in op.dali_params(tuple(p))
        )

    @cached_property
    def feed_dtypes(self) -> tuple[str, ...]:
        """NumPy dtype names of :meth:`feed`'s arrays (the ``external_source`` types)."""
        return tuple(self._probe.params[k][name].dtype.name for k, name in self.feed_layout)

    def feed(self, draw: Draw) -> list[np.ndarray]:
        """The ops' parameters as the arrays the DALI graph's ``external_source`` takes."""
        return [np.ascontiguousarray(draw.params[k][name]) for k, name in self.feed_layout]

    def needs_conditionals(self, gpu: bool) -> bool:
        """Whether the DALI graph of these ops branches per sample (see
        :meth:`Op.needs_conditionals`); the crop and the fused flip never do."""
        return any(op.needs_conditionals(gpu) for op in self.every_op)

    def dali(
        self, images: Any, fed: Sequence[Any], gpu: bool, twin: bool = False
    ) -> tuple[Any, Any]:
        """The ops as a DALI graph on uint8 HWC ``images`` (the crop's output).

        ``fed`` are the DataNodes of :meth:`feed`'s arrays; ``gpu`` and ``twin`` say where
        the graph runs (:class:`~dali_pipes.augment.base.Context`). Returns the images and
        the flip flag to give ``crop_mirror_normalize`` (None: no flip left to do).
        """
        per_op = self._per_op(fed)
        # The size is a per-epoch value (a resolution schedule), not a graph constant.
        ctx = Context(size=self.size(), gpu=gpu, twin=twin)
        if any(not isinstance(op, HorizontalFlip) for op in self.ops):
            images = dali_ops.pixels(images)  # ops pass float32 whole numbers (dali_ops)
        for k, op in enumerate(self.ops):
            if k != self.fused_flip:
                images = op.dali(images, per_op[k], ctx)
        mirror = per_op[self.fused_flip]["flip"] if self.fused_flip is not None else None
        return images, mirror

    def dali_before(self, images: Any, fed: Sequence[Any], gpu: bool, twin: bool = False) -> Any:
        """The ops before the crop as a DALI graph on whole decoded uint8 HWC ``images``
        (:meth:`dali`'s arguments); uint8 again after them, for the crop's window."""
        from nvidia.dali import fn, types

        per_op = self._per_op(fed)
        ctx = Context(size=self.size(), gpu=gpu, twin=twin)
        images = dali_ops.pixels(images)
        for k, op in enumerate(self.before, start=len(self.ops)):
            images = op.dali(images, per_op[k], ctx)
        return fn.cast(images, dtype=types.UINT8)  # pixels are whole numbers in [0, 255]

    def _per_op(self, fed: Sequence[Any]) -> list[dict[str, Any]]:
        """``fed`` (:meth:`feed`'s DataNodes) as each op's parameters by name."""
        # Indexing, not zip(strict=True): DALI's AutoGraph converts this code and its zip
        # takes no keywords.
        per_op: list[dict[str, Any]] = [{} for _ in self.every_op]
        for i, (k, name) in enumerate(self.feed_layout):
            per_op[k][name] = fed[i]
        return per_op


class Targets:
    """The pipeline's boxes and masks: moved by the crop's geometry, then by each op, from
    the same :class:`Draw` as the images (:mod:`dali_pipes.augment.targets`)."""

    def __init__(self, pipeline: Pipeline) -> None:
        for op in pipeline.every_op:
            op.require_targets()  # one line naming an op that cannot move them
        self.pipeline = pipeline

    def boxes(self, draw: Draw, boxes: Boxes, min_size: float = 1.0) -> tuple[Boxes, np.ndarray]:
        """``boxes`` (source pixels) in the output images, clipped, with those under
        ``min_size`` dropped: the kept boxes and which were kept (for their masks)."""
        ctx = Context(size=draw.geometry.out, sizes=draw.geometry.outs)
        chosen = self.pipeline.crop.boxes_kept(boxes, draw.geometry)
        moved = through_geometry(boxes.take(chosen), draw.geometry)
        for k, op in enumerate(self.pipeline.ops):
            moved = op.move_boxes(moved, draw.params[k], ctx)
        moved, kept = sanitized(moved, draw.geometry.shapes(), min_size)
        keep = np.zeros(len(chosen), bool)
        keep[np.flatnonzero(chosen)[kept]] = True
        return moved, keep

    def mask_torch(self, mask: torch.Tensor, draw: Draw, j: int, fill: int = 0) -> torch.Tensor:
        """Sample ``j``'s uint8 ``[C, H, W]`` mask in its output image (nearest neighbour;
        window pixels past the image are ``fill``)."""
        ctx = Context(size=draw.geometry.out, sizes=draw.geometry.outs)
        mask = mask_row(mask, draw.geometry, j, fill)
        for k, op in enumerate(self.pipeline.ops):
            mask = op.move_mask_torch(mask, draw.row(k, j), ctx)
        return mask

    def masks_dali(self, masks: Any, fed: Sequence[Any], ctx: Context) -> Any:
        """The ops on the batch's uint8 HWC masks in DALI, already through the geometry
        (:func:`~dali_pipes.augment.targets.masks_dali.masks_through_geometry`); ``fed``
        are the DataNodes of :meth:`Pipeline.feed`'s arrays."""
        pipeline = self.pipeline
        per_op = pipeline._per_op(fed)
        for k, op in enumerate(pipeline.ops):
            masks = op.move_masks_dali(masks, per_op[k], ctx)
        return masks


def _configs(labels: Sequence[str], ops: Sequence[Op]) -> dict[str, dict[str, Any]]:
    """``ops`` in canonical config form under their labels."""
    return {
        label: {"op": op.name, **asdict(op)}  # type: ignore[call-overload]
        for label, op in zip(labels, ops, strict=True)
    }


def parse_pipeline(crop: Any, ops: Any, key: str, before: Any = None) -> Pipeline:
    """A :class:`Pipeline` from config: ``crop`` a crop op or its parameters (``op`` names
    it); ``ops`` a mapping ``name -> parameters`` in order (``null`` disables one; an
    ``op`` key names the op when the name is a label), or a list of ops / parameter
    mappings with ``op``; ``before``: ops before the crop, the same forms, colour ops
    only. Errors name the key under ``key``."""
    if crop is None:
        raise ConfigError(f"{key}.crop is missing: every split starts with a crop op")
    head = build_op(crop, f"{key}.crop", crop=True)
    assert isinstance(head, CropOp)
    built, labels = _parse_ops(ops, f"{key}.ops")
    early, early_labels = _parse_ops(before, f"{key}.before")
    for label, op in zip(early_labels, early, strict=True):
        if not op.in_place():
            raise ConfigError(
                f"{key}.before.{label}: {op.name} moves pixels; only colour ops (that keep "
                "every pixel in place) can run before the crop"
            )
    if head.varies_in_size():
        for label, op in zip(labels, built, strict=True):
            if op.sized:
                raise ConfigError(
                    f"{key}.ops.{label}: {op.name} draws for one image size, but "
                    f"{head.name} gives each image its own; set its pad_to or remove {label}"
                )
    return Pipeline(head, tuple(built), tuple(labels), tuple(early), tuple(early_labels))


def _parse_ops(ops: Any, key: str) -> tuple[list[Op], list[str]]:
    """The ops of ``ops`` (a mapping label -> parameters, or a list) and their labels."""
    built: list[Op] = []
    labels: list[str] = []
    if isinstance(ops, Mapping):
        for name, params in ops.items():
            if params is None:  # disabled from the command line: augment.train.ops.NAME=null
                continue
            built.append(build_op(params, f"{key}.{name}", default_name=str(name)))
            labels.append(str(name))
    elif isinstance(ops, Sequence) and not isinstance(ops, str):
        for i, entry in enumerate(ops):
            op = build_op(entry, f"{key}.{i}")
            built.append(op)
            taken = sum(1 for label in labels if label.split("#")[0] == op.name)
            labels.append(op.name if not taken else f"{op.name}#{taken + 1}")
    elif ops is not None:
        raise ConfigError(f"{key}={ops!r} is invalid: expected a mapping of op -> parameters")
    return built, labels
