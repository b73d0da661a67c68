"""Colour jitter: brightness, contrast, saturation and hue in a random order.

torchvision ``ColorJitter(brightness, contrast, saturation, hue)`` semantics: a number
``v`` means a factor drawn from [max(0, 1 - v), 1 + v] (hue: a shift from [-v, v]), a pair
is the range itself; the four adjustments run in a random order per sample; a component
whose range is the identity is skipped. ``p`` < 1 applies the whole jitter with that
probability (``RandomApply([ColorJitter(...)], p)``, as SimCLR-style recipes do).

DALI's GPU realisation is DALI arithmetic with conditionals; on the CPU each sample's
jitter is one compiled kernel (:mod:`dali_pipes.augment.ops.cpu_kernels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import torch

from dali_pipes.augment import dali_ops
from dali_pipes.augment.auto.slots import select
from dali_pipes.augment.base import Context, Op, Params, Row, register_op
from dali_pipes.augment.params import number, span

_PARTS = ("brightness", "contrast", "saturation", "hue")
#: One sample's row for the CPU kernel (:mod:`~dali_pipes.augment.ops.cpu_kernels`): whether
#: to apply, the four steps' components (4: none), the factors, the components skipped in
#: every step (bits), and the channel order written out (``perm0..2``: output channel ``c``
#: takes input channel ``perm<c>``; the photometric distortion's).
FIELDS = (
    "apply",
    "at0",
    "at1",
    "at2",
    "at3",
    "brightness",
    "contrast",
    "contrast_inv",
    "saturation",
    "saturation_inv",
    "hue",
    "skipped",
    "perm0",
    "perm1",
    "perm2",
)


def pack(params: Params, skipped: tuple[bool, ...]) -> np.ndarray:
    """The batch's rows of :data:`FIELDS` (what both DALI realisations are fed) from the
    op's parameters; ``skipped``: per component (brightness, contrast, saturation, hue)
    whether its range is the identity, as bits (torchvision skips those); a channel order
    not in ``params`` is the identity."""
    rows = np.empty((len(params["apply"]), len(FIELDS)), dtype=np.float64)
    for i, name in enumerate(FIELDS):
        if name == "skipped":
            rows[:, i] = sum(1 << k for k, skip in enumerate(skipped) if skip)
        elif name in params:
            rows[:, i] = params[name]
        else:
            rows[:, i] = int(name[-1])  # perm<c> = c
    return rows


def _unchanged(images: Any) -> Any:
    return images


def jitter_steps(
    images: Any, packed: Any, ctx: Context, skipped: tuple[bool, ...], unchanged: int = -1
) -> Any:
    """The GPU's realisation of a packed row's four steps: at each position ``at<k>`` the
    component it names, chosen per sample with DALI conditionals. A component ``skipped``
    for the whole batch passes through, as does the key ``unchanged`` (the photometric
    distortion's step not drawn)."""
    from nvidia.dali import fn, types

    def field(name: str) -> Any:
        """A field of the packed row as a float32 operand beside the images."""
        return ctx.operand(fn.cast(packed[FIELDS.index(name)], dtype=types.FLOAT))

    def part(index: int) -> Any:
        def run(x: Any) -> Any:
            if index == 0:
                return dali_ops.brightness(x, field("brightness"))
            if index == 1:
                inv = field("contrast_inv")
                return dali_ops.contrast(x, field("contrast"), inv, ctx)
            if index == 2:
                inv = field("saturation_inv")
                return dali_ops.saturation(x, field("saturation"), inv, ctx)
            return dali_ops.hue(x, field("hue"))

        return run

    # Every position gets a branch per component; a skipped component passes through.
    branches = [(i, _unchanged if skipped[i] else part(i)) for i in range(4)]
    if unchanged >= 0:
        branches.append((unchanged, _unchanged))
    for k in range(4):
        images = select(packed[FIELDS.index(f"at{k}")], branches, images)
    return images


@register_op
@dataclass(frozen=True)
class ColorJitter(Op):
    """torchvision ``ColorJitter(brightness, contrast, saturation, hue)``, in ``RandomApply`` when
    ``p`` < 1: a factor or shift drawn per sample for each component, applied in a random order."""

    name = "color_jitter"
    previews = (
        {"brightness": 0.2, "contrast": 0.2, "saturation": 0.2, "hue": 0.05},
        {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1},
        {"brightness": 0.8, "contrast": 0.8, "saturation": 0.8, "hue": 0.3},
    )
    pointwise = True
    p_gates_all = True
    # Its defaults jitter nothing (no graph); p < 1 adds the branch that skips it.
    graph_params: ClassVar[Mapping[str, Any]] = {
        "brightness": 0.4,
        "contrast": 0.4,
        "saturation": 0.4,
        "hue": 0.1,
        "p": 0.8,
    }
    brightness: Any = 0.0
    contrast: Any = 0.0
    saturation: Any = 0.0
    hue: Any = 0.0
    p: float = 1.0

    def __post_init__(self) -> None:
        self.ranges  # noqa: B018  (each part's range checked once, and kept)
        number(self, "p", 0.0, 1.0)

    @cached_property
    def ranges(self) -> tuple[tuple[float, float] | None, ...]:
        """Per component its (low, high) range, None when it is skipped."""
        inf = float("inf")
        ranges = [span(self, part, 1.0, (0.0, inf), clip_low=True) for part in _PARTS[:3]]
        ranges.append(span(self, "hue", 0.0, (-0.5, 0.5), clip_low=False))
        return tuple(ranges)

    def draws(self) -> int:
        return 9  # the order (4), a factor per component (4), whether to apply (1)

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        order = np.argsort(u[:, :4], axis=1, kind="stable").astype(np.int32)
        params: Params = {f"at{k}": order[:, k] for k in range(4)}
        for i, (part, rng) in enumerate(zip(_PARTS, self.ranges, strict=True)):
            lo, hi = rng or (0.0, 0.0)
            factor = (lo + u[:, 4 + i] * (hi - lo)).astype(np.float32)
            params[part] = factor
            if part in ("contrast", "saturation"):  # torchvision: 1 - factor in double
                params[f"{part}_inv"] = (1.0 - factor.astype(np.float64)).astype(np.float32)
        params["apply"] = u[:, 8] < self.p
        params["packed"] = pack(params, tuple(rng is None for rng in self.ranges))
        return params

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        import torchvision.transforms.v2.functional as F

        if not p["apply"]:
            return image
        for k in range(4):
            part = int(p[f"at{k}"])
            if self.ranges[part] is None:
                continue
            factor = float(p[_PARTS[part]])
            if part == 0:
                image = F.adjust_brightness(image, factor)
            elif part == 1:
                image = F.adjust_contrast(image, factor)
            elif part == 2:
                image = F.adjust_saturation(image, factor)
            else:
                image = F.adjust_hue(image, factor)
        return image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        if all(rng is None for rng in self.ranges):
            return images
        packed = p["packed"]
        if not ctx.gpu_graph:  # one compiled kernel per sample (imports numba: CPU only)
            from dali_pipes.augment.ops import cpu_kernels

            return cpu_kernels.jitter(images, packed)
        if self.p < 1.0:
            if packed[FIELDS.index("apply")] > 0.5:
                images = self._jitter(images, packed, ctx)
        else:
            images = self._jitter(images, packed, ctx)
        return images

    def _jitter(self, images: Any, packed: Any, ctx: Context) -> Any:
        return jitter_steps(images, packed, ctx, tuple(rng is None for rng in self.ranges))

    def needs_conditionals(self, gpu: bool) -> bool:
        """The GPU's realisation picks the order (and, p < 1, whether) per sample with
        conditionals; the CPU's kernel reads them from the packed row."""
        return gpu and any(rng is not None for rng in self.ranges)

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """Both realisations read the packed row (none when the jitter is the identity)."""
        return ("packed",) if any(rng is not None for rng in self.ranges) else ()

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        jitter = v2.ColorJitter(self.brightness, self.contrast, self.saturation, self.hue)
        return jitter if self.p >= 1.0 else v2.RandomApply([jitter], p=self.p)
