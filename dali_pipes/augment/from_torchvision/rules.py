"""One rule per supported torchvision transform: what it becomes in dali_pipes.

A rule reads a transform instance (v1 ``torchvision.transforms`` or v2
``torchvision.transforms.v2``, whose classes differ but whose arguments mean the same) and
returns one :class:`Step`:

- ``convert``: the new :class:`~dali_pipes.augment.from_torchvision.values.Values` (what the
  image is after ``ToTensor``, ``ToDtype``, ``Normalize``, ...);
- ``geometry``: a resize or crop's arguments, which :mod:`.fused` turns into the split's
  decode-fused crop op;
- ``op``: the config of the registered op that realises it (``hflip``, ``color_jitter``,
  ``randaugment``, ...), so its parameters are drawn from (seed, epoch, sample) like any
  op's;
- ``erase``: ``RandomErasing`` as the batch stage's ``random_erasing`` op (its fill is
  put on the batch's scale once the pipeline's end is known);
- ``boxes``: what is done to boxes alone (``SanitizeBoundingBoxes``: the smallest box kept,
  ``augment.min_box_size``; the XYXY format and clamping boxes are what every box gets).

A rule raises :class:`~dali_pipes.augment.from_torchvision.values.Refused` with the reason
for an argument it cannot honour exactly; the walk (:mod:`.convert`) names the transform
and its place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

from dali_pipes.augment.base import OPS, RESAMPLING
from dali_pipes.augment.from_torchvision import args
from dali_pipes.augment.from_torchvision.values import Refused, Values, dtype_name

Kind = Literal["convert", "geometry", "op", "erase", "boxes"]


@dataclass(frozen=True)
class At:
    """Where a rule runs: the image before the transform, torchvision's version (1, 2), and
    ``inner``, which maps a transform nested in this one (``RandomApply``'s list) to an op
    config, naming its place in errors."""

    values: Values
    version: int
    inner: Callable[[Any, int], dict[str, Any]]


@dataclass(frozen=True)
class Rule:
    """A transform's rule: its kind of step, the function that reads it and, for an image
    op that changes what the image is (``Grayscale``'s channel count), the image after it."""

    kind: Kind
    read: Callable[[Any, At], Any]
    image: Callable[[Any, Values], Values] | None = None


RULES: dict[str, Rule] = {}


def rule(
    name: str, kind: Kind, image: Callable[[Any, Values], Values] | None = None
) -> Callable[[Callable[[Any, At], Any]], Callable[[Any, At], Any]]:
    """Register the rule of transform ``name`` (the class name in torchvision)."""

    def register(read: Callable[[Any, At], Any]) -> Callable[[Any, At], Any]:
        RULES[name] = Rule(kind, read, image)
        return read

    return register


@cache
def classes() -> dict[type, tuple[str, int]]:
    """torchvision's classes of the supported transforms -> (name, version)."""
    import torchvision.transforms as v1
    import torchvision.transforms.v2 as v2

    table: dict[type, tuple[str, int]] = {}
    for name in RULES:
        for version, module in ((1, v1), (2, v2)):
            cls = getattr(module, name, None)
            if isinstance(cls, type):
                table.setdefault(cls, (name, version))
    return table


def pixels(at: At) -> None:
    """An image op works on pixels (8-bit, or [0, 1] floats), as torchvision's ops expect."""
    if not at.values.pixels:
        raise Refused(
            "it is given values that are not pixels (after Normalize, or floats 0..255), "
            "where torchvision's colour and geometry ops assume pixels; move it before them"
        )


def three_channels(at: At, hint: str) -> None:
    """An op that is not torchvision's on a one-channel image when it runs on the three
    equal channels a ``Grayscale()`` image is held as (``hint``: what to do instead)."""
    if at.values.channels == 1:
        raise Refused(
            "the image has one channel here (after Grayscale() with num_output_channels=1), "
            f"where this transform is not mapped exactly; {hint}"
        )


# --------------------------------------------------------------------------- conversions


def _from_pil(at: At, converted: Values) -> Values:
    """A conversion of PIL images: v1 raises on a tensor, v2 passes it through."""
    if at.values.pil:
        return converted
    if at.version == 1:
        raise Refused("needs a PIL image, it is given a tensor (torchvision raises)")
    return at.values


@rule("ToTensor", "convert")
def _to_tensor(t: Any, at: At) -> Values:
    return _from_pil(at, at.values.to_tensor())


@rule("PILToTensor", "convert")
def _pil_to_tensor(t: Any, at: At) -> Values:
    return _from_pil(at, at.values.to_image())


@rule("ToImage", "convert")
def _to_image(t: Any, at: At) -> Values:
    return at.values.to_image() if at.values.pil else at.values


@rule("ToDtype", "convert")
def _to_dtype(t: Any, at: At) -> Values:
    if at.values.pil:
        return at.values  # v2 passes PIL images through
    return at.values.to_dtype(dtype_name(t.dtype), bool(t.scale))


@rule("ConvertImageDtype", "convert")
def _convert_image_dtype(t: Any, at: At) -> Values:
    if at.values.pil:
        if at.version == 1:
            raise Refused("needs a tensor, it is given a PIL image (torchvision raises)")
        return at.values
    return at.values.to_dtype(dtype_name(t.dtype), True)


@rule("ToPureTensor", "convert")
def _to_pure_tensor(t: Any, at: At) -> Values:
    return at.values  # a tv_tensors.Image as a plain tensor: the same values


@rule("Normalize", "convert")
def _normalize(t: Any, at: At) -> Values:
    mean, std = tuple(t.mean), tuple(t.std)
    values = at.values.normalize(mean, std)
    if at.values.channels == 1 and max(len(mean), len(std)) > 1:
        if at.version == 1:
            raise Refused(
                f"mean={list(mean)}, std={list(std)} give a number per channel of three, but "
                "the image has one channel after Grayscale() (torchvision raises); give one "
                "mean and one std, e.g. Normalize(mean=[0.449], std=[0.226])"
            )
        return replace(values, channels=3)  # v2 broadcasts the one channel to three
    return values


# --------------------------------------------------------------------------- geometry


def _resampled(t: Any, at: At) -> dict[str, Any]:
    """A resize the decode-fused crop does exactly: of pixels, antialiased, bilinear or
    bicubic; the crop's ``interpolation`` when it is not the crops' default (bilinear)."""
    pixels(at)
    mode = args.require_interpolation(t.interpolation, RESAMPLING)
    args.antialiased(t, at.values.pil)
    return {} if mode == "bilinear" else {"interpolation": mode}


@rule("Resize", "geometry")
def _resize(t: Any, at: At) -> dict[str, Any]:
    if t.max_size is not None:
        raise Refused(f"max_size={t.max_size} is not supported")
    return {"resize": args.size(t.size, shorter=True), **_resampled(t, at)}


@rule("CenterCrop", "geometry")
def _center_crop(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    return {"size": args.size(t.size, shorter=False)}


@rule("RandomResizedCrop", "geometry")
def _random_resized_crop(t: Any, at: At) -> dict[str, Any]:
    return {
        "size": args.square(t.size),
        "scale": [float(v) for v in t.scale],
        "ratio": [float(v) for v in t.ratio],
        **_resampled(t, at),
    }


@rule("RandomCrop", "geometry")
def _random_crop(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    padding = args.padding(t, at.version)
    pads = bool(t.pad_if_needed) or any(padding)
    if pads and t.padding_mode != "constant":
        raise Refused(f"padding_mode={t.padding_mode!r} is not supported; use 'constant'")
    return {
        "size": args.size(t.size, shorter=False),
        "padding": list(padding),
        "pad_if_needed": bool(t.pad_if_needed),
        "fill": args.fill(t.fill, not at.values.floating) if pads else 0,
    }


@rule("RandomZoomOut", "geometry")
def _zoom_out(t: Any, at: At) -> dict[str, Any]:
    import PIL.Image
    from torchvision import tv_tensors

    pixels(at)
    image = PIL.Image.Image if at.values.pil else tv_tensors.Image
    mask_fill = args.typed_fill(t.fill, tv_tensors.Mask)
    if mask_fill not in (None, 0, 0.0, [0], [0.0]):
        raise Refused(f"fill={t.fill!r} pads masks with {mask_fill!r}; masks pad with 0")
    return {
        "zoom_p": float(t.p),
        "zoom_range": [float(v) for v in t.side_range],
        "fill": args.fill(args.typed_fill(t.fill, image), not at.values.floating),
    }


@rule("RandomIoUCrop", "geometry")
def _iou_crop(t: Any, at: At) -> dict[str, Any]:
    return {
        "min_scale": float(t.min_scale),
        "max_scale": float(t.max_scale),
        "min_aspect_ratio": float(t.min_aspect_ratio),
        "max_aspect_ratio": float(t.max_aspect_ratio),
        "options": [float(v) for v in t.options],
        "trials": int(t.trials),
    }


@rule("ScaleJitter", "geometry")
def _scale_jitter(t: Any, at: At) -> dict[str, Any]:
    width, height = (int(v) for v in t.target_size)  # torchvision's (width, height)
    return {
        "size": [height, width],
        "scale_range": [float(v) for v in t.scale_range],
        **_resampled(t, at),
    }


@rule("RandomShortestSize", "geometry")
def _shortest_size(t: Any, at: At) -> dict[str, Any]:
    return {
        "min_size": [int(v) for v in t.min_size],
        "max_size": None if t.max_size is None else int(t.max_size),
        **_resampled(t, at),
    }


# --------------------------------------------------------------------------- boxes


@rule("SanitizeBoundingBoxes", "boxes")
def _sanitize(t: Any, at: At) -> dict[str, Any]:
    if float(t.min_area) != 1.0:
        raise Refused(f"min_area={t.min_area} is not supported; boxes keep an area of 1 or more")
    return {"min_box_size": float(t.min_size)}


@rule("ConvertBoundingBoxFormat", "boxes")
def _box_format(t: Any, at: At) -> dict[str, Any]:
    if str(getattr(t.format, "value", t.format)).upper() != "XYXY":
        raise Refused(f"format={t.format!r}: boxes come out as XYXY; convert them after")
    return {}


@rule("ClampBoundingBoxes", "boxes")
def _clamp_boxes(t: Any, at: At) -> dict[str, Any]:
    return {}  # boxes are clamped to their image always


# --------------------------------------------------------------------------- image ops


@rule("RandomHorizontalFlip", "op")
def _hflip(t: Any, at: At) -> dict[str, Any]:
    return {"op": "hflip", "p": float(t.p)}  # exact on any values


@rule("RandomVerticalFlip", "op")
def _vflip(t: Any, at: At) -> dict[str, Any]:
    return {"op": "vflip", "p": float(t.p)}


@rule("ColorJitter", "op")
def _color_jitter(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    parts: dict[str, Any] = {}
    # torchvision leaves a one-channel image's saturation and hue as they are
    grey = ("saturation", "hue") if at.values.channels == 1 else ()
    for part in ("brightness", "contrast", "saturation", "hue"):
        value = getattr(t, part)
        parts[part] = 0.0 if value is None or part in grey else [float(value[0]), float(value[1])]
    return {"op": "color_jitter", **parts, "p": 1.0}


_PHOTOMETRIC = ("brightness", "contrast", "saturation", "hue")


@rule("RandomPhotometricDistort", "op")
def _photometric_distort(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    three_channels(at, "move it before the Grayscale")
    parts = {part: [float(v) for v in getattr(t, part)] for part in _PHOTOMETRIC}
    return {"op": "photometric_distort", **parts, "p": float(t.p)}


@rule("RandomGrayscale", "op")
def _random_grayscale(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    three_channels(at, "torchvision leaves a grey image as it is: remove it")
    return {"op": "grayscale", "p": float(t.p)}


def _grey_image(t: Any, values: Values) -> Values:
    """``Grayscale(n)``: an image of ``n`` channels. The op gives the grey value in each
    of the three channels it works on; the loader hands over the first when ``n`` is 1."""
    return replace(values, channels=int(t.num_output_channels))


@rule("Grayscale", "op", image=_grey_image)
def _grayscale(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    if t.num_output_channels not in (1, 3):
        raise Refused(f"num_output_channels={t.num_output_channels!r} must be 1 or 3")
    three_channels(
        at,
        "torchvision leaves a grey image as it is (Grayscale(3) repeats it): remove it, or give "
        "the first Grayscale the channel count you want",
    )
    return {"op": "grayscale", "p": 1.0}


@rule("GaussianBlur", "op")
def _gaussian_blur(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    sigma = [float(v) for v in t.sigma]
    return {
        "op": "gaussian_blur",
        "kernel_size": [int(k) for k in t.kernel_size],
        "sigma": sigma,
        "p": 1.0,
    }


@rule("RandomSolarize", "op")
def _solarize(t: Any, at: At) -> dict[str, Any]:
    pixels(at)
    threshold = float(t.threshold)
    if at.values.floating:  # torchvision compares [0, 1] floats with a [0, 1] threshold
        threshold *= 255.0
    return {"op": "solarize", "threshold": threshold, "p": float(t.p)}


@rule("RandomApply", "op")
def _random_apply(t: Any, at: At) -> dict[str, Any]:
    inner = [at.inner(transform, k) for k, transform in enumerate(t.transforms)]
    if not inner:
        raise Refused("has no transforms")
    p = float(t.p)
    # An op whose ``p`` gates all of it (Op.p_gates_all) takes RandomApply's ``p`` as a factor.
    only = OPS.get(str(inner[0]["op"])) if len(inner) == 1 else None
    if only is not None and only.p_gates_all:
        return {**inner[0], "p": float(inner[0]["p"]) * p}
    return {"op": "random_apply", "p": p, "ops": inner}


def _warp(t: Any, at: At) -> dict[str, Any]:
    """The interpolation and fill of the auto-augment transforms."""
    pixels(at)
    three_channels(at, "move it before the Grayscale")
    return {
        "interpolation": args.require_interpolation(t.interpolation, ("nearest", "bilinear")),
        "fill": args.same_fill(t.fill, not at.values.floating),
    }


@rule("RandAugment", "op")
def _randaugment(t: Any, at: At) -> dict[str, Any]:
    return {
        "op": "randaugment",
        "num_ops": int(t.num_ops),
        "magnitude": int(t.magnitude),
        "num_magnitude_bins": int(t.num_magnitude_bins),
        **_warp(t, at),
    }


@rule("TrivialAugmentWide", "op")
def _trivialaugment(t: Any, at: At) -> dict[str, Any]:
    return {"op": "trivialaugment", "num_magnitude_bins": int(t.num_magnitude_bins), **_warp(t, at)}


@rule("AutoAugment", "op")
def _autoaugment(t: Any, at: At) -> dict[str, Any]:
    return {"op": "autoaugment", "policy": str(t.policy.value), **_warp(t, at)}


# --------------------------------------------------------------------------- batch stage


@rule("RandomErasing", "erase")
def _random_erasing(t: Any, at: At) -> dict[str, Any]:
    if at.values.pil:
        raise Refused(
            "needs a tensor image, it is given a PIL image (v1 raises, v2 leaves it unchanged); "
            "place it after ToTensor/ToImage"
        )
    value = t.value
    noise = value is None or (isinstance(value, str) and value == "random")
    return {
        "op": "random_erasing",
        "p": float(t.p),
        "min_area": float(t.scale[0]),
        "max_area": float(t.scale[1]),
        "min_aspect": float(t.ratio[0]),
        "max_aspect": float(t.ratio[1]),
        "mode": "pixel" if noise else "const",
        "min_count": 1,
        "max_count": 1,
        "value": None if noise else ([value] if isinstance(value, int | float) else list(value)),
    }
