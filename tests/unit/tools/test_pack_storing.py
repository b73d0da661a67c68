"""How ``pack`` stores images. JPEGs baseline with optimised tables: every packed image
decodes to the pixels of its file, batches from such a pack equal those from a pack of the
files as they are, bit for bit, and bad files are packed or refused exactly as before.
``pack.max_side``: larger images resized by the project's own filter, the setting recorded,
the backends within their parity bound on them, and a warning when the training crop is
larger than what was stored."""

from __future__ import annotations

import json
import logging
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import BUNDLED_PHOTOS, CORNER
from helpers.shards import pack
from torchvision.transforms import v2

from dali_pipes import build_loader, compose_config
from dali_pipes.errors import DataError
from dali_pipes.image.baseline import jpegtran
from dali_pipes.image.decode import decode_bytes
from dali_pipes.image.headers import image_size, jpeg_coding
from dali_pipes.image.resample import resize_window
from dali_pipes.image.stored_size import stored_shape
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH

slow = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _needs_jpegtran() -> None:
    if jpegtran() is None:
        pytest.skip("jpegtran not installed (make test installs libjpeg-turbo-progs)")


def packed_files(out: Path) -> dict[str, bytes]:
    """Each packed image's bytes by the path of the file it came from."""
    found = {}
    for tar_path in sorted(out.rglob("*.tar")):
        sources = json.loads(tar_path.with_suffix(".json").read_text())["sources"]
        with tarfile.open(tar_path) as tar:
            images = [m for m in tar.getmembers() if not m.name.endswith(".cls")]
            for source, member in zip(sources, images, strict=True):
                found[source] = tar.extractfile(member).read()  # type: ignore[union-attr]
    return found


def pixels(data: bytes, path: str) -> torch.Tensor:
    return decode_bytes(np.frombuffer(data, np.uint8), path)


def test_every_packed_jpeg_is_baseline_with_the_pixels_of_its_file(
    real_photos: Path, tmp_path: Path
) -> None:
    manifest = pack(real_photos, tmp_path / "out", "pack.shard_size_mb=4")
    stored = packed_files(tmp_path / "out")
    progressive = 0
    for source, data in stored.items():
        original = Path(source).read_bytes()
        progressive += jpeg_coding(original) == "progressive"
        assert jpeg_coding(data) == "baseline", source
        assert torch.equal(pixels(data, source), pixels(original, source)), source
    counts = manifest["stored"]
    assert progressive > 0 and counts["converted"] == progressive
    assert counts["bytes_after"] == sum(len(d) for d in stored.values())


@pytest.mark.parametrize("backend", ["torch", "dali"])
def test_batches_of_a_baseline_pack_equal_those_of_the_files_packed_as_they_are(
    real_photos: Path, tmp_path: Path, backend: str
) -> None:
    """The same plan, keys and draws, so any difference would be a pixel changed."""
    pack(real_photos, tmp_path / "baseline", "pack.shard_size_mb=4")
    pack(real_photos, tmp_path / "as-is", "pack.shard_size_mb=4", "pack.baseline=false")
    assert packed_files(tmp_path / "baseline") != packed_files(tmp_path / "as-is")

    def batches(out: Path) -> list[tuple[torch.Tensor, torch.Tensor]]:
        cfg = compose_config(
            ["data=shards", f"data.root={out}", "data.batch_size=4", f"backend={backend}",
             "backend.device=cpu", "augment=randaugment", "augment.train.crop.size=96"]
        )  # fmt: skip
        with build_loader(cfg, "train") as loader:
            loader.set_epoch(1)
            return [(x.clone(), y.clone()) for x, y in loader]

    ours, theirs = batches(tmp_path / "baseline"), batches(tmp_path / "as-is")
    assert len(ours) == len(theirs) > 1
    for (x, y), (x_ref, y_ref) in zip(ours, theirs, strict=True):
        assert torch.equal(y, y_ref) and torch.equal(x, x_ref)


def test_without_jpegtran_pack_stores_the_files_as_they_are_and_says_so_once(
    real_photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr("dali_pipes.tools.pack.jpegtran", lambda: None)
    with caplog.at_level(logging.WARNING, logger="dali_pipes.pack"):
        manifest = pack(real_photos, tmp_path / "out", "pack.shard_size_mb=4")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "libjpeg-turbo-progs" in warnings[0], warnings
    assert manifest["stored"] is None
    for source, data in packed_files(tmp_path / "out").items():
        assert data == Path(source).read_bytes(), source


@slow
@pytest.mark.parametrize("on_error", ["skip", "drop", "raise"])
def test_the_corner_files_pack_as_before_under_every_bad_file_policy(
    tmp_path: Path, on_error: str
) -> None:
    if not CORNER.is_dir():
        pytest.skip(f"corner-case files not found at {CORNER}")
    policy = f"data.on_error={on_error}"
    outcomes = []
    for baseline in ("true", "false"):
        try:
            manifest = pack(CORNER, tmp_path / baseline, policy, f"pack.baseline={baseline}")
            outcomes.append(manifest["skipped"])
        except DataError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]  # the same files skipped, or the same error
    if on_error == "raise":
        return
    stored, as_is = packed_files(tmp_path / "true"), packed_files(tmp_path / "false")
    assert stored.keys() == as_is.keys()
    rewritten = 0
    for source, data in stored.items():
        if data == as_is[source]:
            continue
        rewritten += 1
        assert jpeg_coding(data) == "baseline", source
        assert torch.equal(pixels(data, source), pixels(as_is[source], source)), source
    assert rewritten > 0


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """The shipped photos (640 to 1280 px) packed at most 256 px on their long side."""
    out = tmp_path_factory.mktemp("max-side") / "out"
    return out, pack(BUNDLED_PHOTOS, out, "pack.max_side=256", "pack.quality=95")


def our_resize(image: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """``image`` ([3, H, W]) resized whole to ``shape`` by the loaders' own filter."""
    out = np.empty((*shape, 3), np.uint8)
    whole = np.array(image.shape[1:], np.float64)
    resize_window(image.permute(1, 2, 0).contiguous().numpy(), np.zeros(2), whole, out)
    return torch.from_numpy(out).permute(2, 0, 1)


def test_max_side_stores_larger_images_resized_by_the_projects_filter(
    small_pack: tuple[Path, dict[str, object]],
) -> None:
    out, manifest = small_pack
    resized = 0
    for source, data in packed_files(out).items():
        original = pixels(Path(source).read_bytes(), source)
        height, width = original.shape[1:]
        assert max(image_size(data)) <= 256, source
        if max(height, width) <= 256:
            assert torch.equal(pixels(data, source), original), source
            continue
        resized += 1
        shape = stored_shape(height, width, 256)
        assert image_size(data) == shape, source
        stored = pixels(data, source).float()
        ours = (stored - our_resize(original, shape).float()).abs().mean()
        aliased = v2.functional.resize(original, list(shape), antialias=False).float()
        assert ours < 2.0, (source, ours)  # JPEG at quality 95 (4:2:0 chroma), no more
        assert ours < 0.8 * (stored - aliased).abs().mean(), source  # not another filter
    assert manifest["stored"]["resized"] == resized > 0  # type: ignore[index]
    settings = manifest["settings"]
    assert settings["max_side"] == 256 and settings["quality"] == 95  # type: ignore[index]


def test_the_backends_agree_on_resized_images_within_their_parity_bound(
    small_pack: tuple[Path, dict[str, object]],
) -> None:
    def batches(backend: str) -> torch.Tensor:
        cfg = compose_config(
            ["data=shards", f"data.root={small_pack[0]}", "data.batch_size=8",
             f"backend={backend}", "backend.device=cpu", "augment.train.crop.size=128"]
        )  # fmt: skip
        with build_loader(cfg, "train") as loader:
            return torch.cat([x.float() for x, _ in loader])

    dali, ref = batches("dali"), batches("torch")
    assert dali.shape == ref.shape
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)  # imagenet's: back to 0-255
    assert ((dali - ref) * std * 255).abs().mean() <= DALI_CPU_VS_TORCH.mean


def test_a_training_crop_larger_than_the_stored_images_is_warned_about_once(
    small_pack: tuple[Path, dict[str, object]], caplog: pytest.LogCaptureFixture
) -> None:
    def build(size: int) -> list[str]:
        caplog.clear()
        cfg = compose_config(
            ["data=shards", f"data.root={small_pack[0]}", f"augment.train.crop.size={size}",
             "augment.val.crop.size=64", "augment.val.crop.resize=72"]
        )  # fmt: skip
        with caplog.at_level(logging.WARNING):
            from dali_pipes.config.specs import loader_spec

            loader_spec(cfg, "train")
            loader_spec(cfg, "val")
        return [r.getMessage() for r in caplog.records if "pack.max_side" in r.getMessage()]

    assert build(224) == []
    [warning] = build(320)
    assert "at most 256 px" in warning and "pack.max_side=320" in warning
