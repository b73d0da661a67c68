"""Reading, checking and decoding one image file on the CPU: the one place for it.

The torch backend, the decoded-image cache (:mod:`dali_pipes.backends.cache.ram`), ``scan``,
``pack`` and the DALI backend's search for a bad file all read, check and decode images
here, so they agree on what a bad file is and name it in the same words.

- :func:`read_file` / :func:`read_files`: the bytes, or the one-line error for a file that
  cannot be read or whose read does not finish within the deadline;
- :func:`header_size`: the checks made before any decoder runs -- the bytes were read, they
  are a JPEG, PNG or WebP image, and the header's size is within ``data.max_pixels``;
- :func:`decode_bytes` / :func:`decode`: uint8 RGB ``[3, H, W]``, whatever the file's bit
  depth: a 16-bit PNG is scaled to 0-255 as DALI's decoder scales it (:func:`to_uint8`).

Decoding is ``torchvision.io.decode_image`` (libjpeg-turbo for JPEG), with EXIF orientation
ignored, as ``ImageFolder`` (PIL) and the DALI graph (``adjust_orientation=False``) ignore
it: the crop geometry is computed from the header's size, so every backend must decode the
pixels in the stored orientation. TorchCodec (0.17), which torchvision 0.29 points to, gives
the same pixels on every photo but always applies EXIF orientation (no option to turn it
off), so it would rotate or mirror such files; benchmarks/RESULTS.md has the measurement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import torch

from dali_pipes.errors import DataError, unreadable
from dali_pipes.image.headers import image_size
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT, read_all

Blob: TypeAlias = np.ndarray | DataError  # a file's bytes, or why they could not be read

#: The decision to keep torchvision's decoders, which torchvision deprecated in 0.29 for
#: TorchCodec: TorchCodec gives the same pixels but always applies EXIF orientation, which
#: ``ImageFolder`` and the DALI graph ignore (the crop geometry comes from the header's
#: size), so it would rotate or mirror such files. ``pyproject.toml`` caps torchvision
#: below the release that may drop them; lift the cap when this module moves to TorchCodec
#: (once it can decode without applying the orientation) or another decoder.
TORCHVISION_DECODING = "kept: TorchCodec always applies EXIF orientation"


def _read(path: str) -> Blob:
    try:
        return np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        return unreadable(path, exc)


def read_files(paths: Sequence[str], timeout: float | None = DEFAULT_READ_TIMEOUT) -> list[Blob]:
    """Each file's bytes, or (returned, not raised) the :class:`DataError` naming it: a file
    that cannot be read, or whose read takes longer than ``timeout`` seconds
    (:mod:`dali_pipes.image.reads`)."""
    return read_all(_read, paths, timeout)


def read_file(path: str, timeout: float | None = DEFAULT_READ_TIMEOUT) -> Blob:
    """One file's bytes or the :class:`DataError` naming it (:func:`read_files`)."""
    return read_files([path], timeout)[0]


def header_size(blob: Blob, path: str, max_pixels: int | None = None) -> tuple[int, int]:
    """(height, width) from the image header, or raise the :class:`DataError` naming the
    file: unreadable, not a JPEG/PNG/WebP image, or more pixels than ``max_pixels``."""
    if isinstance(blob, DataError):
        raise blob
    return image_size(blob, path, max_pixels)


def decode_bytes(blob: Blob, path: str, max_pixels: int | None = None) -> torch.Tensor:
    """Decode bytes already read (``path`` names them in errors) to uint8 RGB ``[3, H, W]``,
    or raise :class:`DataError` naming the file."""
    header_size(blob, path, max_pixels)  # before any decoder allocates memory for it
    assert not isinstance(blob, DataError)  # header_size raised the read error
    from torchvision.io import ImageReadMode, decode_image  # ~2 s: not on the DALI path

    data = torch.from_numpy(np.array(blob, dtype=np.uint8, copy=not blob.flags.writeable))
    try:
        return to_uint8(decode_image(data, mode=ImageReadMode.RGB, apply_exif_orientation=False))
    except RuntimeError as exc:
        # torchvision prefixes the reason with its C++ source location; drop that.
        reason = re.sub(r"^.*?\.cpp:\d+,\s*", "", str(exc).strip().splitlines()[0])
        raise DataError(
            f"{path}: cannot decode the image ({reason}); remove or replace it"
        ) from None


def to_uint8(image: torch.Tensor) -> torch.Tensor:
    """``image`` on the contract's 0-255 uint8 scale. torchvision decodes a 16-bit PNG to
    uint16; DALI's decoders give ``round(v * 255 / 65535)``, which this computes exactly in
    integers, so both backends see the same pixels. (torchvision's
    ``ToDtype(torch.uint8, scale=True)`` shifts by 8 bits instead: at most one level lower.)"""
    if image.dtype == torch.uint8:
        return image
    if image.dtype != torch.uint16:
        raise TypeError(f"decoded images are uint8 or uint16, not {image.dtype}")
    return ((image.to(torch.int32) + 128) // 257).to(torch.uint8)


def decode(path: str, max_pixels: int | None = None) -> torch.Tensor:
    """Read and decode one file (:func:`decode_bytes`)."""
    return decode_bytes(read_file(path), path, max_pixels)


__all__ = ["Blob", "decode", "decode_bytes", "header_size", "read_file", "read_files", "to_uint8"]
