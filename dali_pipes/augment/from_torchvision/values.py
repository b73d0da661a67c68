"""What a torchvision pipeline's image is at each step: a PIL image or a tensor, its dtype,
and how its values relate to the 8-bit pixels.

A tensor's value is ``(pixel / 255 - mean) / std`` per channel: uint8 pixels are mean 0,
std 1/255; ``ToTensor`` or ``ToDtype(float32, scale=True)`` makes them mean 0, std 1 (the
[0, 1] floats); each ``Normalize(m, s)`` composes into (mean, std). The batch a loader
hands over is this state at the end of the pipeline: ``augment.mean``/``augment.std`` are
that mean and std (``augment.dtype`` its dtype), so the output has the values the
transform gives. The conversions follow torchvision's rules, v1 and v2 alike: where
torchvision raises, the conversion is refused with the transform named; where v2 passes
an input through unchanged (``ToDtype`` on a PIL image), it does so here too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dali_pipes.augment.spec import PIXEL_STD

#: The dtypes a batch can have, by torch's name (``augment.dtype``).
DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "uint8": "uint8"}


class Refused(Exception):
    """A transform that cannot be mapped, with the reason (the caller names its place)."""


def dtype_name(dtype: Any) -> str:
    """A torch dtype's name as ``augment.dtype`` takes it, or :class:`Refused`."""
    import torch

    if not isinstance(dtype, torch.dtype):
        raise Refused(
            f"dtype {dtype!r} is not a torch dtype (a mapping of dtypes is not supported)"
        )
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise Refused(
            f"dtype torch.{name} is not supported; use one of torch.{', torch.'.join(DTYPES)}"
        )
    return name


@dataclass(frozen=True)
class Values:
    """The image at one step of the pipeline (see the module docstring)."""

    pil: bool = True
    dtype: str = "uint8"
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (PIXEL_STD,) * 3
    #: The image's channels: 3, or 1 after ``Grayscale()`` (``num_output_channels=1``).
    #: A one-channel image is held as three equal channels, so mean and std stay triples
    #: (equal ones) and the loader hands over the first channel.
    channels: int = 3

    @property
    def pixels(self) -> bool:
        """Values an image op works on as torchvision does: 8-bit pixels (a PIL image or a
        uint8 tensor) or the [0, 1] floats of ``ToTensor``."""
        if self.pil or self.dtype == "uint8":
            return True
        return self.mean == (0.0, 0.0, 0.0) and self.std == (1.0, 1.0, 1.0)

    @property
    def floating(self) -> bool:
        """A float tensor."""
        return not self.pil and self.dtype != "uint8"

    def to_tensor(self) -> Values:
        """``ToTensor`` of a PIL image: [0, 1] float32."""
        return Values(pil=False, dtype="float32", std=(1.0, 1.0, 1.0), channels=self.channels)

    def to_image(self) -> Values:
        """``PILToTensor``/``ToImage`` of a PIL image: a uint8 tensor."""
        return Values(pil=False, channels=self.channels)

    def to_dtype(self, dtype: str, scale: bool) -> Values:
        """torchvision's ``to_dtype`` of a tensor; :class:`Refused` where it would not give
        pixel values back (a float that is not [0, 1] to an integer type, or no scaling)."""
        if dtype == self.dtype:
            return self
        if self.dtype == "uint8":  # to a float type
            if not scale:
                return replace(self, dtype=dtype)
            return replace(self, dtype=dtype, std=tuple(255.0 * s for s in self.std))  # type: ignore[arg-type]
        if dtype != "uint8":
            return replace(self, dtype=dtype)
        if not (scale and self.pixels):
            need = "scale=True" if not scale else "[0, 1] floats (before Normalize)"
            raise Refused(f"converting floats to uint8 needs {need}")
        return Values(pil=False, channels=self.channels)

    def normalize(self, mean: tuple[float, ...], std: tuple[float, ...]) -> Values:
        """``Normalize(mean, std)`` of a float tensor."""
        if not self.floating:
            what = "a PIL image" if self.pil else "a uint8 tensor"
            raise Refused(f"needs a float tensor, it is given {what} (torchvision raises)")
        m, s = _three(mean, "mean"), _three(std, "std")
        if any(v <= 0 for v in s):
            raise Refused(f"std={list(std)} must be > 0")
        return replace(
            self,
            mean=tuple(a + b * c for a, b, c in zip(self.mean, m, self.std, strict=True)),  # type: ignore[arg-type]
            std=tuple(a * b for a, b in zip(self.std, s, strict=True)),  # type: ignore[arg-type]
        )

    def value_of(self, value: float, channel: int, final: Values) -> float:
        """A value of this step's scale in channel ``channel`` as ``final``'s scale has it
        (the conversions between are affine per channel)."""
        pixel = value * self.std[channel] + self.mean[channel]
        return (pixel - final.mean[channel]) / final.std[channel]


def _three(values: Any, name: str) -> tuple[float, float, float]:
    """One number per RGB channel (a single number is broadcast, as torch does)."""
    try:
        floats = [float(v) for v in values]
    except (TypeError, ValueError):
        raise Refused(f"{name}={values!r} must be numbers") from None
    if len(floats) == 1:
        floats *= 3
    if len(floats) != 3:
        raise Refused(f"{name}={values!r} needs one number or three (RGB images)")
    return (floats[0], floats[1], floats[2])
