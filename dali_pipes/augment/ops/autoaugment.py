"""AutoAugment: one of a learned policy's sub-policies per sample (torchvision's semantics).

Each sub-policy is two (operation, probability, magnitude bin) steps over a 10-bin table;
a step is applied with its probability, signed operations get a random sign. The policies
are torchvision's ``AutoAugmentPolicy`` ones (``imagenet``, ``cifar10``, ``svhn``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.base import Context, Params, register_op
from dali_pipes.augment.keyed import choice
from dali_pipes.errors import require

POLICIES = ("imagenet", "cifar10", "svhn")
_BINS = 10


@cache
def _policy(name: str) -> tuple[tuple[tuple[str, float, int | None], ...], ...]:
    """torchvision's sub-policies for ``name``: ((op, probability, magnitude bin), ...).

    Cached: the torch backend draws per sample, and building torchvision's transform each
    time would cost more than the draw."""
    from torchvision.transforms.v2 import AutoAugment as TV
    from torchvision.transforms.v2 import AutoAugmentPolicy

    return tuple(tuple(step) for step in TV(AutoAugmentPolicy(name))._policies)


@register_op
@dataclass(frozen=True)
class AutoAugment(auto.SlotOp):
    """torchvision ``AutoAugment(policy, interpolation, fill)``."""

    name = "autoaugment"
    previews = ({"policy": "imagenet"}, {"policy": "cifar10"}, {"policy": "svhn"})
    policy: str = "imagenet"
    interpolation: str = "nearest"
    fill: int = 0

    def __post_init__(self) -> None:
        require(self.policy in POLICIES, "policy", self.policy, f"choose one of {POLICIES}")
        self.check_warp()

    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The policy as arrays: op index, probability, magnitude bin, ``[P, 2]`` each."""
        steps = _policy(self.policy)
        ops = np.array([[auto.index(op) for op, _, _ in s] for s in steps])
        prob = np.array([[p for _, p, _ in s] for s in steps])
        bins = np.array([[m or 0 for _, _, m in s] for s in steps], dtype=np.float64)
        return ops, prob, bins

    def prefixes(self) -> list[str]:
        return ["0.", "1."]  # a sub-policy's two steps

    def kinds(self) -> tuple[int, ...]:
        names = {op for s in _policy(self.policy) for op, _, _ in s} | {"Identity"}
        return auto.kinds_of(tuple(names))

    def draws(self) -> int:
        return 5  # sub-policy, then (applied, sign) for each of its two steps

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        ops, prob, bins = self._table()
        standard = auto.table("standard")
        pick = choice(u[:, 0], len(ops))
        params: Params = {}
        for k, prefix in enumerate(self.prefixes()):
            applied = u[:, 1 + 2 * k] <= prob[pick, k]
            step_ops = np.where(applied, ops[pick, k], auto.index("Identity"))
            mags = auto.magnitudes(
                standard,
                step_ops,
                bins[pick, k],
                u[:, 2 + 2 * k] <= 0.5,
                _BINS,
                ctx.size,
            )
            params.update(
                auto.slot_params(prefix, step_ops, mags, ctx.size, self.interpolation, self.fill)
            )
        return params

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.AutoAugment(v2.AutoAugmentPolicy(self.policy), **self.warp_options())
