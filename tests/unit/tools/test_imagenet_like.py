"""``benchmarks/imagenet_like.py``: real photos at ImageNet's sizes and encoding, in its layout."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import BUNDLED_PHOTOS, REPO
from helpers.once import made_once
from helpers.warm import python
from PIL import Image, JpegImagePlugin

from dali_pipes import build_loader, compose_config

SCRIPT = REPO / "benchmarks" / "imagenet_like.py"
# The IJG luminance table (JPEG standard, Annex K), which libjpeg scales by quality.
LUMA = [16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57]
LUMA += [69, 56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55]
LUMA += [64, 81, 104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100]
LUMA += [103, 99]


def make(*args: str | Path | int) -> subprocess.CompletedProcess[str]:
    """The script as a user runs it, in its own process."""
    return subprocess.run(
        [python(), str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="session")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The script's tree and statistics from the bundled photos, made once per test run for
    every xdist worker (helpers/once.py); read-only."""

    def run_script(folder: Path) -> None:
        out, stats = folder / "tree", folder / "stats.json"
        run = make(BUNDLED_PHOTOS, out, "--copies", 3, "--workers", 2, "--stats", stats)
        assert run.returncode == 0, run.stderr
        assert "| images (train, one epoch) | 39 |" in run.stdout  # the printed table

    folder, _ = made_once(tmp_path_factory, "imagenet-like", run_script)
    return folder / "tree", json.loads((folder / "stats.json").read_text())


def test_every_photo_is_in_val_once_and_in_train_once_per_copy(made: tuple[Path, dict]) -> None:
    out, record = made
    sources = sorted(p for p in BUNDLED_PHOTOS.rglob("*") if p.suffix in (".jpg", ".jpeg"))
    for split, per_photo in (("val", 1), ("train", 3)):
        files = sorted(out.glob(f"{split}/*/*"))
        assert all(f.suffix == ".JPEG" for f in files)
        assert len(files) == per_photo * len(sources)
        assert {f.parent.name for f in files} == {p.parent.name for p in sources}
    assert record["statistics"]["train_images"] == 3 * len(sources)
    for photo in record["photos"]:
        label, stem = photo["name"].split("/")
        val = (out / "val" / label / f"{stem}.JPEG").read_bytes()
        assert all(
            (out / "train" / label / f"{stem}_c{k}.JPEG").read_bytes() == val for k in range(3)
        )


def test_sizes_and_encoding_are_imagenets(made: tuple[Path, dict]) -> None:
    """Shorter side 333-500 px with the longer at 500 unless that would break it; baseline
    JPEG at quality 90 (the IJG table scaled as libjpeg does), 4:2:0 for colour photos."""
    out, record = made
    expected = sorted(max(1, min(255, (q * (200 - 2 * 90) + 50) // 100)) for q in LUMA)
    for photo in record["photos"]:
        label, stem = photo["name"].split("/")
        with Image.open(out / "val" / label / f"{stem}.JPEG") as im:
            assert isinstance(im, JpegImagePlugin.JpegImageFile)
            w, h = im.size
            assert 333 <= min(w, h) <= 500
            assert max(w, h) == 500 or min(w, h) == 333, (w, h)
            aspect = photo["source_width"] / photo["source_height"]
            assert abs(w / h - aspect) < 0.01 * aspect  # not distorted
            assert not im.info.get("progressive")
            assert sorted(im.quantization[0]) == expected
            if im.mode == "RGB":
                assert JpegImagePlugin.get_sampling(im) == 2  # 4:2:0
            else:
                assert im.mode == "L"
    assert record["statistics"]["subsampling"].get("4:2:0", 0) >= len(record["photos"]) - 1


def test_the_same_photos_give_the_same_bytes(made: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = made
    again = tmp_path / "again"
    assert make(BUNDLED_PHOTOS, again, "--copies", 1, "--workers", 1).returncode == 0
    for f in sorted(again.rglob("*.JPEG")):
        twin = out / f.relative_to(again)
        if f.parent.parent.name == "train":
            twin = twin.with_name(f.name)  # _c0
        assert f.read_bytes() == twin.read_bytes(), f


def test_the_tree_is_what_data_imagenet_reads(made: tuple[Path, dict]) -> None:
    out, record = made
    cfg = compose_config(
        [
            *("data=imagenet", f"data.root={out}", "backend=dali", "backend.device=cpu"),
            *("data.batch_size=8", "augment.train.crop.size=64"),
        ]
    )
    loader = build_loader(cfg, "train")
    assert len(loader.spec.source) == record["statistics"]["train_images"]
    images, _ = next(iter(loader))
    assert tuple(images.shape) == (8, 3, 64, 64) and np.isfinite(images.float().numpy()).all()
    loader.close()


def test_an_existing_out_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    run = make(BUNDLED_PHOTOS, out)
    assert run.returncode != 0
    assert run.stderr.strip().count("\n") == 0, run.stderr
    assert str(out) in run.stderr and "already exists" in run.stderr
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_a_photo_pillow_cannot_read_is_named_and_nothing_is_left(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(BUNDLED_PHOTOS / "birds", src / "birds")
    bad = src / "birds" / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not a JPEG")
    run = make(src, tmp_path / "out", "--workers", 1)
    assert run.returncode != 0 and run.stderr.strip().count("\n") == 0, run.stderr
    assert str(bad) in run.stderr and "Pillow cannot decode it" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
