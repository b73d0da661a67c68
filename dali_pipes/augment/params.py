"""Op parameters coerced and checked in ``__post_init__``: numbers within bounds,
``[low, high]`` pairs, colour-jitter spans, sizes and padding fills.

Each helper reads one field of a (frozen) op, writes back its canonical form (so two configs
that mean the same build equal ops) and raises a one-line error naming only the field;
:func:`~dali_pipes.augment.base.build_op` puts the op's key in front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dali_pipes.errors import require


def number(
    op: Any,
    name: str,
    lo: float | None = None,
    hi: float | None = None,
    *,
    integer: bool = False,
) -> float:
    """Coerce field ``name`` of ``op`` to a number within [lo, hi]; return it.

    The error names only the field: :func:`build_op` puts the op's key in front.
    """
    raw = getattr(op, name)
    bounds = " and ".join(
        b for b in (f">= {lo}" if lo is not None else "", f"<= {hi}" if hi is not None else "") if b
    )
    need = f"expected {'an integer' if integer else 'a number'} {bounds}".strip()
    ok = isinstance(raw, int | float) and not isinstance(raw, bool) and not math.isnan(raw)
    if ok and integer:
        ok = float(raw).is_integer()
    value = (int(raw) if integer else float(raw)) if ok else 0
    ok = ok and (lo is None or value >= lo) and (hi is None or value <= hi)
    require(ok, name, raw, need)
    object.__setattr__(op, name, value)
    return float(value)


def pair(op: Any, name: str) -> tuple[float, float]:
    """Coerce a ``[low, high]`` field to a tuple of two floats with low <= high."""
    value = getattr(op, name)
    ok = isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2
    if ok:
        try:
            value = (float(value[0]), float(value[1]))
        except (TypeError, ValueError):
            ok = False
    require(ok and value[0] <= value[1], name, getattr(op, name), "expected [low, high]")
    object.__setattr__(op, name, value)
    return value


def span(
    op: Any, name: str, center: float, bound: tuple[float, float], clip_low: bool
) -> tuple[float, float] | None:
    """torchvision ``ColorJitter``'s rule: ``v`` means [center - v, center + v] (the low end
    clipped at ``bound[0]`` when ``clip_low``), ``[lo, hi]`` is taken as given; ``None``
    when the range is the identity (then the component is skipped, as torchvision does)."""
    value = getattr(op, name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        require(value >= 0, name, value, "must be >= 0")
        object.__setattr__(op, name, float(value))
        lo, hi = center - float(value), center + float(value)
        if clip_low:
            lo = max(lo, bound[0])
    else:
        lo, hi = pair(op, name)
    require(
        bound[0] <= lo <= hi <= bound[1],
        name,
        getattr(op, name),
        f"the range must lie within [{bound[0]}, {bound[1]}]",
    )
    return None if lo == hi == center else (lo, hi)


def side_or_shape(op: Any, name: str, *, optional: bool = False) -> int | tuple[int, int] | None:
    """Coerce a size field to an int (one side) or a ``(height, width)`` tuple of positive
    ints (``[s]`` is ``s``, as torchvision reads it); None only when ``optional``."""
    value = getattr(op, name)
    if value is None and optional:
        return None
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 1:
        value = value[0]
    ok = False
    if isinstance(value, int | float) and not isinstance(value, bool):
        ok = float(value).is_integer() and value >= 1
        value = int(value) if ok else value
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        ok = all(
            isinstance(v, int | float) and not isinstance(v, bool) and float(v).is_integer()
            for v in value
        )
        value = (int(value[0]), int(value[1])) if ok else value
        ok = ok and min(value) >= 1
    need = "expected a positive int or [height, width]" + (", or null" if optional else "")
    require(ok, name, getattr(op, name), need)
    object.__setattr__(op, name, value)
    return value


def shape_of(size: int | tuple[int, int]) -> tuple[int, int]:
    """(height, width) of a size that is one side or (height, width)."""
    return (size, size) if isinstance(size, int) else size


def fill_of(op: Any, name: str) -> tuple[int, int, int]:
    """Coerce a padding fill (one grey level 0..255, or one per RGB channel) to three."""
    value = getattr(op, name)
    values = (
        [value] * 3 if isinstance(value, int | float) and not isinstance(value, bool) else value
    )
    ok = isinstance(values, Sequence) and not isinstance(values, str) and len(values) == 3
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and float(v).is_integer()
        for v in values
    )
    ok = ok and all(0 <= v <= 255 for v in values)
    require(ok, name, value, "expected a grey level 0..255 or three, one per RGB channel")
    fill = (int(values[0]), int(values[1]), int(values[2]))
    object.__setattr__(op, name, fill[0] if len(set(fill)) == 1 else fill)
    return fill


def rgb(fill: int | tuple[int, int, int]) -> tuple[int, int, int]:
    """A checked fill (:func:`fill_of`) as one grey level per RGB channel."""
    return (fill, fill, fill) if isinstance(fill, int) else fill
