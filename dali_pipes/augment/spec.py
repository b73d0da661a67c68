"""The ``augment`` config node as a frozen spec: each split's crop, ops and batch ops
(parsed into a :class:`~dali_pipes.augment.Pipeline` by :mod:`dali_pipes.augment`, where
each op's schema lives), and the batch's output format (mean, std, dtype, layout)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from dali_pipes.errors import ConfigError, require

if TYPE_CHECKING:
    from dali_pipes.augment import Pipeline
    from dali_pipes.augment.batch import BatchStage
    from dali_pipes.augment.views import Views

DTYPES = ("float32", "float16", "bfloat16", "uint8")
#: ``augment.std`` of a batch of pixels as they are (0..255): the only normalisation
#: ``dtype=uint8`` takes, with a zero mean.
PIXEL_STD = 1.0 / 255.0


def _triple(obj: Any, name: str, key: str) -> tuple[float, float, float]:
    value = tuple(float(v) for v in getattr(obj, name))
    require(len(value) == 3, key, value, "expected three numbers, one per RGB channel")
    object.__setattr__(obj, name, value)
    return value  # type: ignore[return-value]


def _require_pixels(mean: tuple[float, ...], std: tuple[float, ...]) -> None:
    """``dtype=uint8`` hands over the pixels: mean 0 and std 1/255 (no arithmetic)."""
    pixels = all(m == 0 for m in mean) and all(math.isclose(s, PIXEL_STD) for s in std)
    require(
        pixels,
        "augment.dtype",
        "uint8",
        "hands over the pixels as they are: set augment.mean=[0,0,0] and "
        f"augment.std=[{PIXEL_STD!r}]*3, or choose a float dtype",
    )


def _check_channels(spec: AugmentSpec, views: str | None = None) -> None:
    """``augment.channels``: 3, or 1 (grey) with one mean and one std, and (``views``: the
    split that has them) never for views, which are made with three channels."""
    key, channels = "augment.channels", spec.channels
    require(channels in (1, 3), key, channels, "choose 1 or 3")
    if channels == 1:
        mean, std = spec.mean, spec.std
        one = len(set(mean)) == 1 and len(set(std)) == 1
        require(
            one, key, 1, f"takes one mean and one std (three equal numbers), not {mean} and {std}"
        )
        require(
            views is None, key, 1, f"augment.{views} has views, made with three channels; use 3"
        )


def _check_own_sizes(spec: AugmentSpec, split: str, batch_ops: Sequence[Any]) -> None:
    """A split whose images have sizes of their own (a list per batch) takes no batch
    ops, no views and no channels_last: each needs one size."""
    crop = f"augment.{split}.crop"
    require(
        not batch_ops,
        f"augment.{split}.batch",
        [op.name for op in batch_ops],
        f"batch ops need one image size, but {crop} gives each image its own; remove them",
    )
    views = getattr(spec, split).views
    require(
        views is None,
        f"augment.{split}.views",
        "(views)",
        f"views need one size, but {crop} gives each image its own",
    )
    require(
        not spec.channels_last,
        "augment.channels_last",
        True,
        f"{crop} gives each image its own size (a list of [3, H, W]); set it false",
    )


@dataclass(frozen=True)
class SplitAugment:
    """One split's augmentation, as configured: the decode-fused ``crop`` (its parameters,
    ``op`` naming it), then ``ops`` applied in the listed order (name -> parameters;
    ``null`` disables one; an ``op`` key names the op when the name is only a label), then
    the ``batch`` stage's ops on whole batches (mixup/cutmix, random erasing), same form.
    ``views``: several views of each sample, each group of them a change of ``crop`` and
    ``ops`` (:mod:`dali_pipes.augment.views`); None: one image per sample. ``before``:
    colour ops on the whole decoded image before the crop (what a torchvision pipeline
    that distorts colours first maps to), same form as ``ops``.

    Turned into a :class:`~dali_pipes.augment.Pipeline` by :class:`AugmentSpec`, which
    knows the split's key for error messages.
    """

    crop: Any = field(default_factory=lambda: {"op": "random_resized_crop"})
    ops: Any = field(default_factory=lambda: {"hflip": {"p": 0.5}})
    batch: Any = field(default_factory=dict)
    views: Any = None
    before: Any = field(default_factory=dict)


def _default_val() -> SplitAugment:
    return SplitAugment(crop={"op": "resize_center_crop"}, ops={})


@dataclass(frozen=True)
class ParsedSplits:
    """An :class:`AugmentSpec`'s splits as objects, by split name: the crop and ops (a
    :class:`~dali_pipes.augment.Pipeline`), the batch ops with what they do to labels,
    and the views with their canonical configured form (None for a plain split)."""

    pipelines: dict[str, Pipeline]
    batches: dict[str, tuple[Any, Any]]
    views: dict[str, tuple[Views, Any]]


@dataclass(frozen=True)
class AugmentSpec:
    """What every backend does to every image, and the output format of a batch.

    ``imports``: modules that register a user's own ops (``@dali_pipes.augment.register_op``)
    so the config can name them. They are imported where a config becomes this spec
    (:func:`dali_pipes.config.specs.to_spec`), before it is built: building a spec has no
    side effects, and in plain Python one imports one's own module before naming its ops.
    """

    train: SplitAugment = field(default_factory=SplitAugment)
    val: SplitAugment = field(default_factory=_default_val)
    # On the 0-1 scale, like torchvision's Normalize; backends multiply by 255. A batch
    # holds (pixel / 255 - mean) / std: std 1/255 and mean 0 hand over the pixels as
    # they are (0..255), std 1 and mean 0 scale them to [0, 1] (torchvision's ToTensor).
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    dtype: str = "float32"
    channels_last: bool = False
    #: The batch's channels: 3 (RGB), or 1 (grey, torchvision's ``Grayscale()``): images are
    #: made with three channels and the loader hands over the first, which is why a grey
    #: split's ops must leave the three equal (``grayscale`` with ``p=1`` among them) and
    #: ``mean``/``std`` be three equal numbers. Set by a torchvision pipeline that outputs
    #: one channel (:mod:`dali_pipes.augment.from_torchvision`).
    channels: int = 3
    #: Detection: a box narrower or lower than this (pixels) after the crop is dropped with
    #: its label and mask (torchvision's ``SanitizeBoundingBoxes(min_size)``).
    min_box_size: float = 1.0
    imports: tuple[str, ...] = ()
    #: torchvision pipelines given by ``_target_`` nodes, per split: each one given
    #: replaces that split, and ``mean``, ``std`` and ``dtype`` become what it outputs.
    #: Read where a config becomes this spec (:func:`dali_pipes.config.specs.to_spec`,
    #: by :mod:`dali_pipes.augment.from_torchvision`), which leaves it empty.
    torchvision: Any = field(default_factory=lambda: {"train": None, "val": None})

    def __post_init__(self) -> None:
        pending = self.torchvision is not None and any(dict(self.torchvision).values())
        require(
            not pending,
            "augment.torchvision",
            "(a transform)",
            "is read where a config becomes a spec (dali_pipes.config.specs.to_spec); in "
            "Python use dali_pipes.augment.from_torchvision.augment_spec(transform)",
        )
        _triple(self, "mean", "augment.mean")
        std = _triple(self, "std", "augment.std")
        require(all(s > 0 for s in std), "augment.std", std, "every value must be > 0")
        require(self.dtype in DTYPES, "augment.dtype", self.dtype, f"choose one of {DTYPES}")
        require(self.min_box_size >= 0, "augment.min_box_size", self.min_box_size, "must be >= 0")
        if self.dtype == "uint8":
            _require_pixels(self.mean, std)
        _check_channels(self)
        object.__setattr__(self, "imports", tuple(str(m) for m in self.imports))
        from dali_pipes.augment.batch import batch_config

        parsed = self.parsed  # every split parsed and checked, once
        # Keep the canonical form (every parameter given), so equal pipelines compare equal.
        for split, pipeline in parsed.pipelines.items():
            crop, ops = pipeline.config()
            batch = batch_config(*parsed.batches[split])
            canonical = SplitAugment(
                crop=crop,
                ops=ops,
                batch=batch,
                views=parsed.views[split][1],
                before=pipeline.before_config(),
            )
            object.__setattr__(self, split, canonical)
            if pipeline.crop.varies_in_size():
                _check_own_sizes(self, split, parsed.batches[split][0])
            if self.dtype == "uint8":
                for op in parsed.batches[split][0]:
                    require(
                        op.integer_safe,
                        f"augment.{split}.batch",
                        op.name,
                        "works on float images; augment.dtype=uint8 takes no such batch op",
                    )

    @cached_property
    def parsed(self) -> ParsedSplits:
        """Each split's crop and ops, batch ops and views as objects, parsed from the
        configured form and checked (a one-line error naming the key otherwise)."""
        from dali_pipes.augment import parse_pipeline
        from dali_pipes.augment.batch import parse_batch
        from dali_pipes.augment.views import parse_views, single

        splits = (("train", self.train), ("val", self.val))
        pipelines = {
            split: parse_pipeline(aug.crop, aug.ops, f"augment.{split}", aug.before)
            for split, aug in splits
        }
        batches = {split: parse_batch(aug.batch, f"augment.{split}.batch") for split, aug in splits}
        views: dict[str, tuple[Views, Any]] = {}
        for split, aug in splits:
            if aug.views is None:
                views[split] = (single(pipelines[split]), None)
                continue
            require(
                not pipelines[split].before,
                f"augment.{split}.before",
                aug.before,
                "ops before the crop run on the one decoded image, but the split has views; "
                "move them after the crop",
            )
            views[split] = parse_views(pipelines[split], aug.views, f"augment.{split}")
            _check_channels(self, views=split)
            require(
                not batches[split][0],
                f"augment.{split}.batch",
                aug.batch,
                "batch ops take one image per sample but the split has views; remove them",
            )
        return ParsedSplits(pipelines, batches, views)

    @property
    def normalizes(self) -> bool:
        """Whether batches are computed from the pixels (False: ``dtype=uint8``, the
        pixels as they are)."""
        return self.dtype != "uint8"

    def pipeline(self, train: bool) -> Pipeline:
        """The split's crop and ops, validated; refused (one line) for a split with views,
        whose every view has a pipeline of its own (:meth:`views`)."""
        split = "train" if train else "val"
        if self.multi_view(train):
            raise ConfigError(
                f"augment.{split} makes {len(self.views(train))} views of each sample "
                f"({', '.join(self.views(train).names)}); this needs one image per sample: "
                "choose an augment without views"
            )
        return self.parsed.pipelines[split]

    def views(self, train: bool) -> Views:
        """The split's views (a plain split: its pipeline as the one view)."""
        return self.parsed.views["train" if train else "val"][0]

    def multi_view(self, train: bool) -> bool:
        """Whether the split has ``views``: its batches hold a list of view tensors."""
        return (self.train if train else self.val).views is not None

    def own_sizes(self, train: bool) -> bool:
        """Whether the split's images each keep a size of their own (a batch's images are
        then a list of ``[3, H, W]`` tensors: the crop
        :meth:`~dali_pipes.augment.base.CropOp.varies_in_size`)."""
        return not self.multi_view(train) and self.pipeline(train).crop.varies_in_size()

    def out_size(self, train: bool, epoch: int = 0) -> int:
        """The side of the split's output images in ``epoch`` (a resolution schedule moves
        it); of its first view for a split with views."""
        return self.views(train).pipelines[0].crop.size_at(epoch)

    def out_shape(self, train: bool, epoch: int = 0) -> tuple[int, int]:
        """(height, width) of the split's output images in ``epoch`` (not square after a
        crop of a (height, width) size)."""
        return self.pipeline(train).size(epoch)

    def batch_stage(
        self, train: bool, num_classes: int, seed: int = 0, rank: int = 0
    ) -> BatchStage | None:
        """The split's batch stage for data of ``num_classes`` (None: no batch ops)."""
        from dali_pipes.augment.batch import BatchStage

        split = "train" if train else "val"
        ops, labels = self.parsed.batches[split]
        if not ops:
            return None
        return BatchStage(ops, num_classes, seed, rank, f"augment.{split}.batch", labels)
