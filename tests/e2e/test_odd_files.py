"""Files a real dataset holds that are not plain 8-bit JPEGs: 16-bit PNGs, FIFOs and reads
that never return, symlink loops. Every backend gives the contract's batches or names the
file; nothing hangs."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import write_jpeg
from helpers.errors import folder_cfg, one_line
from helpers.pngs import textured16, write_png16
from helpers.stalls import Stall

from dali_pipes import DataError, build_loader
from dali_pipes.data.sources import discover_folder
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH, figures

BACKENDS = ["dali", "torch"]
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def pixels(images: torch.Tensor) -> torch.Tensor:
    """Normalised batches back on the 0-255 scale."""
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD).view(1, 3, 1, 1) * 255
    return images.float() * std + mean


def epoch(loader: Any) -> tuple[torch.Tensor, torch.Tensor]:
    loader.set_epoch(1)
    images, labels = zip(*loader, strict=True)
    return pixels(torch.cat(images)), torch.cat(labels)


@pytest.fixture(scope="module")
def deep_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two classes, each with 8-bit JPEGs and 16-bit PNGs (RGB and grey) mixed."""
    root = tmp_path_factory.mktemp("deep")
    rng = np.random.default_rng(4)
    for c, name in enumerate(("a", "b")):
        (root / name).mkdir()
        for k in range(3):
            write_png16(
                root / name / f"deep_{k}.png", textured16(48, 64, 1 if k == 2 else 3, c * 3 + k)
            )
            write_jpeg(root / name / f"flat_{k}.jpg", rng.integers(0, 255, (48, 64, 3), np.uint8))
    return root


def deep_loader(root: Path, backend: str, *extra: str) -> Any:
    return build_loader(
        folder_cfg(
            root, "data.batch_size=4", "augment.train.crop.size=32", *extra, backend=backend
        ),
        "train",
    )


def test_16_bit_pngs_among_jpegs_give_the_same_batches_on_dali_torch_and_the_ram_cache(
    deep_tree: Path,
) -> None:
    with (
        deep_loader(deep_tree, "dali") as dali,
        deep_loader(deep_tree, "torch") as torch_loader,
        deep_loader(deep_tree, "dali", "data.cache=ram") as cache,
    ):
        (a, la), (b, lb), (c, lc) = epoch(dali), epoch(torch_loader), epoch(cache)
    assert a.shape == b.shape == c.shape == (12, 3, 32, 32)
    assert torch.equal(la, lb) and torch.equal(lb, lc)
    assert float(b.min()) > -0.5 and float(b.max()) < 255.5, "values on the 0-255 scale"
    assert torch.equal(b, c), "the RAM cache decodes as the torch backend"
    assert DALI_CPU_VS_TORCH.admits(figures(a, b)), figures(a, b)


@pytest.fixture
def fifo_tree(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for k in range(3):
            write_jpeg(root / name / f"{k}.jpg", rng.integers(0, 255, (24, 32, 3), np.uint8))
    os.mkfifo(root / "a" / "x.jpg")
    yield root


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fifo_named_like_an_image_is_refused_by_name_under_raise(
    fifo_tree: Path, backend: str
) -> None:
    with pytest.raises(DataError) as exc:
        build_loader(folder_cfg(fifo_tree, backend=backend), "train")
    assert f"{fifo_tree / 'a' / 'x.jpg'}: is not a regular file (a FIFO)" in one_line(exc)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fifo_named_like_an_image_is_skipped_and_reported_under_skip(
    fifo_tree: Path, backend: str
) -> None:
    with build_loader(
        folder_cfg(fifo_tree, "data.on_error=skip", backend=backend), "train"
    ) as loader:
        assert sum(len(labels) for _, labels in loader) == 6
        assert list(loader.bad_files) == [str(fifo_tree / "a" / "x.jpg")]
        assert loader.skipped == 0, "left out when listed, as an unsupported format: no sample"


@pytest.fixture
def stalled(fifo_tree: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A listed regular file whose reads block until the test ends, as on a dead mount: a
    FIFO no one writes to once the folder is listed (:mod:`helpers.stalls`), so that every
    reader blocks, the compiled batch reader and the C library's alike."""
    path = fifo_tree / "b" / "1.jpg"
    os.unlink(fifo_tree / "a" / "x.jpg")
    stall = Stall(path)
    stall.install(monkeypatch.setattr)
    yield path
    stall.release()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_past_the_deadline_is_a_bad_file_under_skip_and_an_error_under_raise(
    fifo_tree: Path, stalled: Path, backend: str
) -> None:
    cfg = folder_cfg(fifo_tree, "data.read_timeout=0.5", "data.on_error=skip", backend=backend)
    start = time.monotonic()
    with build_loader(cfg, "train") as loader:
        assert sum(len(labels) for _, labels in loader) == 6  # a substitute took its slot
        assert list(loader.bad_files) == [str(stalled)]
        assert "read_timeout=0.5 s" in loader.bad_files[str(stalled)]
    cfg = folder_cfg(fifo_tree, "data.read_timeout=0.5", backend=backend)
    with build_loader(cfg, "train") as loader, pytest.raises(DataError) as exc:
        list(loader)
    assert str(stalled) in one_line(exc) and "did not finish within" in one_line(exc)
    assert time.monotonic() - start < 30


def test_a_symlink_loop_is_not_followed_and_is_named_in_a_warning(
    fifo_tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    os.unlink(fifo_tree / "a" / "x.jpg")
    (fifo_tree / "a" / "deeper").mkdir()
    os.symlink(fifo_tree / "a", fifo_tree / "a" / "deeper" / "loop")
    with caplog.at_level(logging.WARNING, logger="dali_pipes"):
        source = discover_folder(fifo_tree)
    assert len(source.files) == 6 and len(set(source.files)) == 6
    assert any("symlink loop" in r.message and "loop" in r.message for r in caplog.records)
