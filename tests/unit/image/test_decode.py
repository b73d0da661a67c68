"""Decoding on the CPU returns the contract's uint8 RGB for every bit depth it accepts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.pngs import textured16, write_png16

from dali_pipes.image.decode import decode, to_uint8


def dali_decode(path: Path) -> np.ndarray:
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():  # type: ignore[no-untyped-def]
        encoded = fn.external_source(source=lambda: [np.fromfile(path, dtype=np.uint8)], batch=True)
        return fn.decoders.image(encoded, device="cpu", output_type=types.RGB)

    p = pipe()
    p.build()
    return np.array(p.run()[0][0])


@pytest.mark.parametrize("channels", [3, 1], ids=["rgb", "grey"])
def test_a_16_bit_png_decodes_to_uint8_exactly_as_dalis_decoder(
    tmp_path: Path, channels: int
) -> None:
    path = tmp_path / "deep.png"
    pixels = textured16(24, 40, channels)
    write_png16(path, pixels)
    image = decode(str(path))
    assert image.dtype == torch.uint8 and image.shape == (3, 24, 40)
    expected = np.round(pixels.astype(np.float64) * 255 / 65535).astype(np.uint8)
    assert np.array_equal(image.permute(1, 2, 0).numpy(), np.broadcast_to(expected, (24, 40, 3)))
    assert np.array_equal(image.permute(1, 2, 0).numpy(), dali_decode(path))


def test_every_16_bit_level_maps_to_the_nearest_8_bit_one() -> None:
    levels = torch.arange(65536, dtype=torch.int32).to(torch.uint16).view(1, 1, -1)
    got = to_uint8(levels).view(-1).numpy().astype(np.int64)
    nearest = np.round(np.arange(65536) * 255 / 65535).astype(np.int64)
    assert np.array_equal(got, nearest)


def test_an_8_bit_image_is_returned_as_it_is() -> None:
    image = torch.randint(0, 256, (3, 5, 7), dtype=torch.uint8)
    assert to_uint8(image) is image
