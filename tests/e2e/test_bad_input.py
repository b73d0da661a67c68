"""Bad input gets one clear line naming the path or value, never a deep stack trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import HAS_CUDA, write_jpeg
from helpers.errors import folder_cfg, one_line, small_tree

from dali_pipes import ConfigError, DataError, DeviceError, build_loader, compose_config
from dali_pipes.errors import DaliPipesError


def test_missing_root_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(DataError) as exc:
        build_loader(folder_cfg(tmp_path / "nope"))
    assert str(tmp_path / "nope") in one_line(exc) and "does not exist" in str(exc.value)


def test_empty_root_says_class_folders_are_expected(tmp_path: Path) -> None:
    with pytest.raises(DataError) as exc:
        build_loader(folder_cfg(tmp_path))
    assert str(tmp_path) in one_line(exc) and "no class folders" in str(exc.value)


def test_class_folder_without_images_is_named(tmp_path: Path) -> None:
    small_tree(tmp_path, {"a": 2})
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "readme.txt").write_text("no images here")
    with pytest.raises(DataError) as exc:
        build_loader(folder_cfg(tmp_path))
    assert str(tmp_path / "b") in one_line(exc) and "no usable images" in str(exc.value)


def test_unset_root_asks_for_data_root() -> None:
    with pytest.raises(ConfigError) as exc:
        build_loader(compose_config(["data=folder"]))
    assert "data.root" in one_line(exc)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_files_without_an_image_extension_are_ignored_like_imagefolder(
    tmp_path: Path, backend: str
) -> None:
    small_tree(tmp_path, {"a": 2, "b": 3})
    (tmp_path / "a" / "labels.csv").write_text("x,y\n")
    (tmp_path / "b" / ".DS_Store").write_bytes(b"\x00\x01")
    loader = build_loader(folder_cfg(tmp_path, backend=backend), "val")
    assert [int(v) for _, labels in loader for v in labels] == [0, 0, 1, 1, 1]


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a JPEG", b"", b"\xff\xd8\xff\xe0\x00\x10JFIF"],
    ids=["text", "empty", "header-only"],
)
def test_a_non_image_named_jpg_fails_with_its_path(
    tmp_path: Path, backend: str, content: bytes
) -> None:
    small_tree(tmp_path, {"a": 3})
    bad = tmp_path / "a" / "1b_broken.jpg"
    bad.write_bytes(content)
    loader = build_loader(folder_cfg(tmp_path, backend=backend), "val")
    with pytest.raises(DataError) as exc:
        list(loader)
    assert str(bad) in one_line(exc)


def test_a_truncated_jpeg_that_dali_cannot_decode_is_named(tmp_path: Path) -> None:
    small_tree(tmp_path, {"a": 3})
    rng = np.random.default_rng(2)
    good = tmp_path / "a" / "big.jpg"
    write_jpeg(good, rng.integers(0, 255, size=(300, 400, 3), dtype=np.uint8))
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 8])  # header intact, most of the scan missing
    loader = build_loader(folder_cfg(tmp_path), "val")
    try:
        batches = list(loader)
    except DataError as exc:
        assert str(good) in str(exc) and "\n" not in str(exc)
    else:  # libjpeg-turbo may pad a truncated scan; then it decodes like torchvision does
        assert sum(len(labels) for _, labels in batches) == 4


def test_unknown_backend_lists_the_choices() -> None:
    with pytest.raises(ConfigError) as exc:
        compose_config(["backend=tensorflow"])
    assert "backend" in one_line(exc) and "tensorflow" in str(exc.value)


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU message")
@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_gpu_device_without_cuda_says_so(tmp_path: Path, backend: str) -> None:
    small_tree(tmp_path, {"a": 2})
    with pytest.raises(DeviceError) as exc:
        build_loader(folder_cfg(tmp_path, "backend.device=gpu", backend=backend))
    assert "backend.device=gpu" in one_line(exc) and "cpu" in str(exc.value)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("data.batch_size=0", "data.batch_size"),
        ("data.batch_size=many", "batch_size"),
        ("augment.dtype=int8", "augment.dtype"),
        ("augment.train.crop.scale=[0.5,0.1]", "augment.train.crop.scale"),
        ("augment.val.crop.resize=8", "augment.val.crop.resize"),
        ("backend.device=tpu", "backend.device"),
        ("backend.num_threads=0", "backend.num_threads"),
        ("backend.hw_decoder_load=1.5", "backend.hw_decoder_load"),
        ("data.bogus=1", "data.bogus"),
    ],
)
def test_invalid_config_values_name_the_key(tmp_path: Path, override: str, key: str) -> None:
    small_tree(tmp_path, {"a": 2})
    with pytest.raises(DaliPipesError) as exc:
        build_loader(folder_cfg(tmp_path, override))
    assert isinstance(exc.value, ConfigError)
    assert key in one_line(exc)
