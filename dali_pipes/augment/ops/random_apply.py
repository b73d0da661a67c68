"""A list of ops applied together with probability ``p`` (torchvision ``RandomApply``).

One draw decides for the whole list, so the ops are applied all or none, as torchvision's
``RandomApply([ColorJitter(...), GaussianBlur(...)], p)`` does; each op then draws its own
parameters as it would alone (their draws follow the apply draw, op by op). An op with a
probability of its own (``color_jitter``, ``gaussian_blur``, ``grayscale``, the flips) needs
no wrapper for one transform: ``RandomApply([ColorJitter(...)], p=0.8)`` is
``color_jitter`` with ``p: 0.8``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.base import Context, Op, Params, Row, build_op, register_op
from dali_pipes.augment.params import number
from dali_pipes.errors import require


def _part(p: Mapping[str, Any], k: int) -> dict[str, Any]:
    """Op ``k``'s parameters out of the wrapper's (keys ``"<k>.<name>"``)."""
    prefix = f"{k}."
    return {name[len(prefix) :]: value for name, value in p.items() if name.startswith(prefix)}


@register_op
@dataclass(frozen=True)
class RandomApply(Op):
    """torchvision ``RandomApply(transforms, p)``: ``ops`` (each a mapping with ``op``
    naming it, or an op) in order, all applied when the sample's draw is below ``p``."""

    name = "random_apply"
    p_gates_all = True
    #: The default (a colour jitter, then a blur: a self-supervised "view") lets the op be
    #: built alone, as the gallery and the graph checks build every op; give your own list.
    ops: Any = (
        {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.2, "hue": 0.1},
        {"op": "gaussian_blur", "kernel_size": 23, "sigma": (0.1, 2.0)},
    )
    p: float = 0.5

    def __post_init__(self) -> None:
        entries = self.ops
        require(
            isinstance(entries, Sequence) and not isinstance(entries, str) and len(entries) > 0,
            "ops",
            entries,
            "expected a list of ops, each a mapping with `op` naming it",
        )
        built = self.built  # each op built and checked once
        object.__setattr__(self, "ops", tuple({"op": op.name, **asdict(op)} for op in built))  # type: ignore[call-overload]
        number(self, "p", 0.0, 1.0)

    @cached_property
    def built(self) -> tuple[Op, ...]:
        """The wrapped ops, validated."""
        return tuple(build_op(entry, f"ops.{i}") for i, entry in enumerate(self.ops))

    @property
    def pointwise(self) -> bool:  # type: ignore[override]
        """Pointwise when every wrapped op is."""
        return all(op.pointwise for op in self.built)

    @property
    def keeps_places(self) -> bool:  # type: ignore[override]
        """Keeps every pixel in place when every wrapped op does (boxes and masks pass)."""
        return all(op.pointwise or op.keeps_places for op in self.built)

    def draws(self) -> int:
        return 1 + sum(op.draws() for op in self.built)

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        params: Params = {"apply": u[:, 0] < self.p}
        offset = 1
        for k, op in enumerate(self.built):
            n = op.draws()
            for name, values in op.sample(u[:, offset : offset + n], ctx).items():
                params[f"{k}.{name}"] = values
            offset += n
        return params

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        if not p["apply"]:
            return image
        for k, op in enumerate(self.built):
            image = op.torch(image, _part(p, k), ctx)
        return image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        if self.p < 1.0:
            if p["apply"]:
                images = self._all(images, p, ctx)
        else:
            images = self._all(images, p, ctx)
        return images

    def _all(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        for k in range(len(self.built)):
            images = self.built[k].dali(images, _part(p, k), ctx)
        return images

    def needs_conditionals(self, gpu: bool) -> bool:
        return self.p < 1.0 or any(op.needs_conditionals(gpu) for op in self.built)

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        kept = ["apply"] if self.p < 1.0 else []
        for k, op in enumerate(self.built):
            own = tuple(_part(dict.fromkeys(names), k))
            kept += [f"{k}.{name}" for name in op.dali_params(own)]
        return tuple(kept)

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomApply([op.torchvision() for op in self.built], p=self.p)
