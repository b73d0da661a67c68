"""A torchvision pipeline (``transforms.Compose`` or ``transforms.v2.Compose``) as dali_pipes'
augmentation: the same crops, ops and output, realised by every backend.

:func:`augment_spec` maps each transform to the op registry (:mod:`.rules`; the resizes and
crops to the decode-fused crop, :mod:`.fused`; ``RandomErasing`` to the batch stage) and the
conversions to the batch's dtype, mean and std (:mod:`.values`), so the random parameters
are drawn from (seed, epoch, sample) as for any preset. A transform or an argument that
cannot be mapped exactly is refused in one line (:mod:`.convert`). docs/how-to/torchvision.md has
the table and what differs from torchvision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from dali_pipes.augment.from_torchvision.convert import SUPPORTED, Converted, convert
from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.errors import ConfigError

__all__ = [
    "SUPPORTED",
    "Converted",
    "augment_spec",
    "convert",
    "from_config",
    "instantiate",
    "is_transform",
]
KEY = "augment.torchvision"


class Format(NamedTuple):
    """The batch a pipeline outputs: its normalisation, dtype and channels, and the
    smallest box kept (``SanitizeBoundingBoxes``; None: not given)."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    dtype: str
    channels: int
    min_box_size: float | None = None


def is_transform(obj: Any) -> bool:
    """Whether ``obj`` looks like a torchvision transform or pipeline (rather than a preset
    name, an op list or a spec): a ``torch.nn.Module``, anything from
    ``torchvision.transforms``, or a list holding one."""
    import torch

    if isinstance(obj, list | tuple):  # a list of transforms is read as their Compose
        return any(is_transform(item) for item in obj)
    module = type(obj).__module__
    return isinstance(obj, torch.nn.Module) or module.startswith("torchvision.transforms")


def augment_spec(transform: Any, *, channels_last: bool = False) -> AugmentSpec:
    """The :class:`AugmentSpec` whose splits both run ``transform`` (a loader uses the one
    of its split), with the batch's dtype, mean, std and channels the transform gives."""
    converted = convert(transform)
    given = converted.min_box_size
    return AugmentSpec(
        train=converted.split,
        val=converted.split,
        mean=converted.mean,
        std=converted.std,
        dtype=converted.dtype,
        channels=converted.channels,
        channels_last=channels_last,
        min_box_size=AugmentSpec.min_box_size if given is None else given,
    )


def instantiate(node: Any, key: str) -> Any:
    """A transform from a config node of ``_target_``s (``augment.torchvision.<split>``)."""
    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ConfigError(
            f"{key}={node!r} is invalid: expected a transform given by _target_, e.g. "
            "{_target_: torchvision.transforms.v2.Compose, transforms: [...]}"
        )
    from hydra.utils import instantiate as build

    try:
        return build(node, _convert_="all")
    except Exception as exc:  # Hydra wraps the constructor's own error
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        reason = " ".join(lines[:2]) if lines else type(exc).__name__
        raise ConfigError(f"{key}: cannot build the transform ({reason})") from None


def from_config(
    nodes: Any,
) -> tuple[dict[str, SplitAugment], Format]:
    """``augment.torchvision``: the splits it gives (``train``, ``val``; a split left null
    keeps its own) and the batch format (mean, std, dtype, channels) they output, which
    must agree."""
    if not isinstance(nodes, Mapping) or not set(nodes) <= {"train", "val"}:
        raise ConfigError(
            f"{KEY}={nodes!r} is invalid: expected {{train: <transform>, val: <transform>}}, "
            "each a transform given by _target_ (or null)"
        )
    splits: dict[str, SplitAugment] = {}
    formats: dict[str, Format] = {}
    for split, node in nodes.items():
        if node is None:
            continue
        key = f"{KEY}.{split}"
        try:
            converted = convert(instantiate(node, key))
        except ConfigError as exc:
            raise ConfigError(str(exc) if str(exc).startswith(key) else f"{key}: {exc}") from None
        splits[split] = converted.split
        formats[split] = Format(
            converted.mean,
            converted.std,
            converted.dtype,
            converted.channels,
            converted.min_box_size,
        )
    one = [split for split, fmt in formats.items() if fmt.channels == 1]
    if one and len(formats) < 2:
        raise ConfigError(
            f"{KEY}.{one[0]} gives one-channel batches (Grayscale()), which the other split's "
            "augment cannot: give both splits a torchvision transform"
        )
    if len(set(formats.values())) > 1:
        raise ConfigError(
            f"{KEY}: train and val give different batches (mean, std, dtype, channels: "
            f"{formats['train']} and {formats['val']}); end both with the same conversions"
        )
    return splits, next(iter(formats.values()))
