"""torchvision's argument forms, read from a transform instance as v1 and v2 store them.

v1 and v2 keep some arguments differently (v2 ``Resize`` keeps ``[256]`` for ``256``, the
interpolation as it was given -- a name, an ``InterpolationMode`` or a PIL constant --,
``RandomCrop``'s padding as (left, right, top, bottom) and the original ``fill`` beside its
own per-type table); each reader here returns one plain form, or raises
:class:`~dali_pipes.augment.from_torchvision.values.Refused` saying what is not supported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dali_pipes.augment.from_torchvision.values import Refused

#: PIL's resampling constants, as torchvision's ``InterpolationMode`` reads an int.
_PIL_MODES = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}


def interpolation(value: Any) -> str:
    """The interpolation's name (``bilinear``, ``nearest``, ...)."""
    from torchvision.transforms import InterpolationMode

    if isinstance(value, InterpolationMode):
        return str(value.value)
    if isinstance(value, int) and not isinstance(value, bool) and value in _PIL_MODES:
        return _PIL_MODES[value]
    if isinstance(value, str):
        return InterpolationMode(value.lower()).value
    raise Refused(f"interpolation={value!r} is not an interpolation mode")


def require_interpolation(value: Any, allowed: tuple[str, ...]) -> str:
    """The interpolation's name when it is one of ``allowed``, else :class:`Refused`."""
    name = interpolation(value)
    if name not in allowed:
        raise Refused(
            f"interpolation={name!r} is not supported here; use "
            + " or ".join(f"InterpolationMode.{a.upper()}" for a in allowed)
        )
    return name


def antialiased(t: Any, pil: bool) -> None:
    """A resize of a tensor must antialias (the decode-fused resize always does); on a PIL
    image torchvision always antialiases, whatever ``antialias`` says."""
    if not pil and t.antialias is not True:
        raise Refused(
            f"antialias={t.antialias!r} on a tensor image resizes without antialiasing, which "
            "is not supported: use antialias=True, or resize before ToTensor/ToImage"
        )


def size(value: Any, *, shorter: bool) -> int | tuple[int, int]:
    """A size as torchvision reads it: an int, ``[s]`` (``shorter``: the shorter side, as
    ``Resize`` reads it; else ``(s, s)``), or (height, width)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if shorter else (value, value)
    if isinstance(value, Sequence) and len(value) in (1, 2):
        sides = [int(v) for v in value]
        if len(sides) == 1:
            return sides[0] if shorter else (sides[0], sides[0])
        return (sides[0], sides[1])
    raise Refused(f"size={value!r} is not an int or (height, width)")


def square(value: Any) -> int:
    """A size that must be square (the crop op's output)."""
    h, w = size(value, shorter=False)  # type: ignore[misc]
    if h != w:
        raise Refused(f"size={value!r} is not square; this transform supports square sizes")
    return int(h)


def padding(t: Any, version: int) -> tuple[int, int, int, int]:
    """``RandomCrop``'s padding as (left, top, right, bottom)."""
    value = t.padding
    if value is None:
        return (0, 0, 0, 0)
    if version == 2:  # v2 keeps (left, right, top, bottom)
        left, right, top, bottom = (int(v) for v in value)
        return (left, top, right, bottom)
    sides = [value] if isinstance(value, int) else [int(v) for v in value]
    if len(sides) == 1:
        return (sides[0], sides[0], sides[0], sides[0])
    if len(sides) == 2:
        return (sides[0], sides[1], sides[0], sides[1])
    if len(sides) == 4:
        return (sides[0], sides[1], sides[2], sides[3])
    raise Refused(f"padding={value!r} needs 1, 2 or 4 numbers")


def fill(value: Any, pixels: bool) -> int | tuple[int, int, int]:
    """A fill colour in pixels (0..255): torchvision's ``fill`` of an image op, which is in
    the image's own scale (``pixels``: 8-bit; else [0, 1] floats, where only 0 is the same)."""
    if value is None:
        return 0
    if isinstance(value, dict):
        raise Refused(f"fill={value!r}: a fill per input type is not supported; give one value")
    values = [value] if isinstance(value, int | float) else list(value)
    if len(values) == 1:
        values *= 3
    if len(values) != 3:
        raise Refused(f"fill={value!r} needs one value or three (RGB images)")
    if not pixels and any(v != 0 for v in values):
        raise Refused(f"fill={value!r} on a float image is not supported; fill before ToTensor")
    if not all(float(v).is_integer() and 0 <= v <= 255 for v in values):
        raise Refused(f"fill={value!r} must be whole grey levels 0..255")
    ints = (int(values[0]), int(values[1]), int(values[2]))
    return ints[0] if len(set(ints)) == 1 else ints


def same_fill(value: Any, pixels: bool) -> int:
    """A fill the auto-augment ops take: one grey level for every channel."""
    filled = fill(value, pixels)
    if not isinstance(filled, int):
        raise Refused(f"fill={value!r}: a fill per channel is not supported here; give one value")
    return filled


def typed_fill(value: Any, kind: type) -> Any:
    """The fill a v2 transform gives an input of type ``kind`` from a fill per input type
    (a dict), looked up as torchvision looks it up: the type's own key if the dict holds
    it (``in``: a ``defaultdict``'s default is never made), else ``"others"``, else none
    (which pads with 0). Not a dict: the fill itself."""
    if not isinstance(value, dict):
        return value
    if kind in value:
        return value[kind]
    return value.get("others")
