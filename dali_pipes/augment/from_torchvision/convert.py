"""Walk a torchvision pipeline and build the split it describes.

The pipeline is read in order (nested ``Compose``/``nn.Sequential`` flattened): the
resizes and crops at its head become the decode-fused crop (:mod:`.fused`), the image
transforms after them the ops, ``RandomErasing`` the batch stage, and the conversions
(``ToTensor``, ``ToDtype``, ``Normalize``, ...) the batch's dtype, mean and std
(:mod:`.values`). Every transform is mapped exactly or refused: one line naming it, its
place (``[i]``, ``[i][j]`` inside a nested one) and what is supported.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dali_pipes.augment.base import build_op
from dali_pipes.augment.batch import parse_batch
from dali_pipes.augment.from_torchvision.fused import Misplaced, crop_config
from dali_pipes.augment.from_torchvision.rules import RULES, At, classes
from dali_pipes.augment.from_torchvision.values import Refused, Values
from dali_pipes.augment.spec import SplitAugment
from dali_pipes.errors import ConfigError

#: The transforms that map, by torchvision's class name (v1 and v2 alike).
SUPPORTED = tuple(RULES)


@dataclass(frozen=True)
class Converted:
    """A torchvision pipeline as one split's augmentation and the batch's format."""

    split: SplitAugment
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    dtype: str
    channels: int = 3
    #: ``SanitizeBoundingBoxes(min_size)``'s smallest box kept (None: not given).
    min_box_size: float | None = None


def flatten(transform: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """(place, transform) of each transform in order, nested pipelines flattened."""
    import torch
    import torchvision.transforms as v1
    import torchvision.transforms.v2 as v2

    if type(transform) in (v1.Compose, v2.Compose):
        children = list(transform.transforms)
    elif type(transform) is torch.nn.Sequential or isinstance(transform, list | tuple):
        children = list(transform)
    else:
        yield where or "[0]", transform
        return
    for i, child in enumerate(children):
        yield from flatten(child, f"{where}[{i}]")


def describe(transform: Any) -> str:
    """A transform's name for a message: torchvision's class name, or the full name of
    another class."""
    known = classes().get(type(transform))
    if known is not None:
        return f"{known[0]} (v{known[1]})"
    kind = type(transform)
    return f"{kind.__module__}.{kind.__qualname__}"


def unsupported(where: str, transform: Any) -> ConfigError:
    """The one-line refusal of a transform that is not supported at all."""
    return ConfigError(
        f"torchvision transform {where} {describe(transform)} is not supported; supported "
        f"(torchvision.transforms and .v2): {', '.join(SUPPORTED)}"
    )


def refused(where: str, transform: Any, reason: str) -> ConfigError:
    """The one-line refusal of a supported transform's argument or place."""
    return ConfigError(f"torchvision transform {where} {describe(transform)}: {reason}")


@dataclass
class _Walk:
    """The pipeline read so far."""

    values: Values = field(default_factory=Values)
    geometry: list[tuple[str, Any, str, dict[str, Any]]] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    erasing: list[tuple[str, Any, dict[str, Any], Values]] = field(default_factory=list)
    first_op: tuple[str, Any] | None = None
    #: Colour ops before the resize/crop: run on the whole image (``before``).
    before: list[dict[str, Any]] = field(default_factory=list)
    boxes: dict[str, Any] = field(default_factory=dict)

    def add(self, where: str, transform: Any) -> None:
        name, version = self.identify(where, transform)
        kind = RULES[name].kind
        read = self.read(where, transform, name, version)
        if kind == "convert":
            self.values = read
        elif kind == "boxes":
            self.boxes.update(read)
        elif kind == "op" and not self.geometry and _keeps_places(read):
            self.before.append(self.checked(where, transform, read))
            image = RULES[name].image
            if image is not None:
                self.values = image(transform, self.values)
        elif kind == "geometry":
            if self.first_op is not None:
                op_where, op = self.first_op
                raise refused(
                    where,
                    transform,
                    f"a resize or crop must come before every image op ({op_where} "
                    f"{describe(op)} comes before it): it is fused with decoding",
                )
            self.geometry.append((where, transform, name, read))
        else:
            if kind == "op" and self.erasing:
                raise refused(
                    where,
                    transform,
                    "RandomErasing works on whole batches after every image op; move it after "
                    "this transform",
                )
            self.first_op = self.first_op or (where, transform)
            if kind == "op":
                self.ops.append(self.checked(where, transform, read))
                image = RULES[name].image
                if image is not None:
                    self.values = image(transform, self.values)
            else:
                self.erasing.append((where, transform, read, self.values))

    def identify(self, where: str, transform: Any) -> tuple[str, int]:
        known = classes().get(type(transform))
        if known is None:
            raise unsupported(where, transform)
        return known

    def read(self, where: str, transform: Any, name: str, version: int) -> Any:
        at = At(self.values, version, lambda inner, k: self.inner(f"{where}[{k}]", inner))
        try:
            return RULES[name].read(transform, at)
        except Refused as exc:
            raise refused(where, transform, str(exc)) from None

    def inner(self, where: str, transform: Any) -> dict[str, Any]:
        """An op config of a transform inside ``RandomApply``."""
        name, version = self.identify(where, transform)
        if RULES[name].kind != "op":
            raise refused(where, transform, "only image ops can be inside RandomApply")
        config = self.checked(where, transform, self.read(where, transform, name, version))
        image = RULES[name].image
        if image is not None and image(transform, self.values) != self.values:
            raise refused(
                where,
                transform,
                "inside RandomApply it would give some images another channel count than "
                "the others, which cannot be batched; place it outside RandomApply",
            )
        return config

    def checked(self, where: str, transform: Any, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` once its op accepts it (an error names the transform)."""
        try:
            build_op(config, "op")
        except ConfigError as exc:
            raise refused(where, transform, str(exc)) from None
        return config

    def crop(self) -> dict[str, Any]:
        steps = [(name, read) for _, _, name, read in self.geometry]
        try:
            config = crop_config(steps)
        except Misplaced as exc:
            where, transform, _, _ = self.geometry[exc.index]
            raise refused(where, transform, str(exc)) from None
        where, transform, _, _ = self.geometry[-1]
        try:
            build_op(config, "crop", crop=True)
        except ConfigError as exc:
            raise refused(where, transform, str(exc)) from None
        return config

    def batch(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for k, (where, transform, config, at) in enumerate(self.erasing):
            try:
                value = _fill(config["value"], at, self.values)
            except Refused as exc:
                raise refused(where, transform, str(exc)) from None
            label = "random_erasing" if k == 0 else f"random_erasing#{k + 1}"
            out[label] = {**config, "value": value}
            try:
                parse_batch({label: out[label]}, "batch")
            except ConfigError as exc:
                raise refused(where, transform, str(exc)) from None
        return out


def _fill(value: list[float] | None, at: Values, final: Values) -> Any:
    """RandomErasing's fill, given in the scale of its place (``at``), on the scale of the
    batch (``final``): exact for a constant; noise only where the two scales are one."""
    if value is None:
        if (at.mean, at.std) != (final.mean, final.std) or not final.floating:
            raise Refused(
                "value='random' draws normal noise on the scale of its place, which differs "
                "from the batch's here (the transforms after it rescale); place it last"
            )
        return 0.0
    if len(value) not in (1, at.channels):
        if at.channels == 1:
            raise Refused(
                f"value={value!r} needs one value: the image has one channel here (after "
                "Grayscale()); torchvision raises"
            )
        raise Refused(f"value={value!r} needs one value or three (RGB images)")
    values = value * 3 if len(value) == 1 else value
    fills = [at.value_of(float(v), c, final) for c, v in enumerate(values)]
    if final.dtype == "uint8":  # torch truncates a float fill into uint8 pixels
        fills = [float(math.floor(v + 1e-6)) for v in fills]
    return fills[0] if len(set(fills)) == 1 else fills


def convert(transform: Any) -> Converted:
    """``transform`` (a torchvision ``Compose``, v1 or v2, an ``nn.Sequential``, a list of
    transforms or one transform) as a split and the batch's dtype, mean and std, or one
    :class:`~dali_pipes.errors.ConfigError` line naming what is not supported."""
    walk = _Walk()
    for where, item in flatten(transform):
        walk.add(where, item)
    crop = walk.crop() if walk.geometry else {"op": "whole"}
    if walk.values.pil:
        raise ConfigError(
            "the torchvision transform ends with PIL images, which cannot be batched: end it "
            "with ToTensor, PILToTensor or ToImage (and ToDtype/Normalize as you need)"
        )
    before = {f"{c['op']}#{k + 1}" if k else str(c["op"]): c for k, c in enumerate(walk.before)}
    split = SplitAugment(crop=crop, ops=walk.ops, batch=walk.batch(), before=before)
    values = walk.values
    min_box = walk.boxes.get("min_box_size")
    return Converted(split, values.mean, values.std, values.dtype, values.channels, min_box)


def _keeps_places(config: dict[str, Any]) -> bool:
    """Whether an op config's op keeps every pixel in place (a colour op)."""
    return build_op(config, "op").in_place()
