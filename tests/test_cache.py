"""``data.cache=ram|gpu``: decode once, augment from memory, same samples and pixels."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import gpu
from test_contract import SIZE, N, ids
from test_shards import pack

from dali_pipes import build_loader, compose_config
from dali_pipes.backends import cached
from dali_pipes.errors import ConfigError, DataError, DeviceError


def loader(root: Path, *extra: str, split: str = "train", **kw: Any) -> Any:
    overrides = [
        "data=folder",
        f"data.root={root}",
        "data.batch_size=4",
        "seed=2",
        f"augment.train.crop.size={SIZE}",
        "backend.device=cpu",
        *extra,
    ]
    return build_loader(compose_config(overrides), split, **kw)


def epoch(loader: Any, number: int) -> tuple[torch.Tensor, torch.Tensor]:
    loader.set_epoch(number)
    images, labels = zip(*loader, strict=True)
    return torch.cat(images), torch.cat(labels)


@pytest.mark.parametrize("split", ["train", "val"])
def test_ram_cache_gives_exactly_the_torch_backends_batches(
    identity_tree: Path, split: str
) -> None:
    with (
        loader(identity_tree, "data.cache=ram", split=split) as cache,
        loader(identity_tree, "backend=torch", "backend.num_workers=1", split=split) as ref,
    ):
        for n in (0, 1):
            a, b = epoch(cache, n), epoch(ref, n)
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_ram_cache_matches_the_torch_backend_on_real_photos(photos: Path) -> None:
    common = ["data.batch_size=32", "augment.train.crop.size=224"]
    with (
        loader(photos, *common, "data.cache=ram") as cache,
        loader(photos, *common, "backend=torch", "backend.num_workers=2") as ref,
    ):
        assert torch.equal(epoch(cache, 3)[0], epoch(ref, 3)[0])


def test_the_cache_never_reads_the_files_again(identity_tree: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(identity_tree, root)
    with loader(root, "data.cache=ram") as cache:
        shutil.rmtree(root)
        for n in range(3):
            seen = [i for images, _ in (cache.set_epoch(n) or cache) for i in ids(images)]
            assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_cached_epochs_cover_every_sample_once_across_ranks(
    identity_tree: Path, world_size: int
) -> None:
    seen = []
    for rank in range(world_size):
        with loader(identity_tree, "data.cache=ram", rank=rank, world_size=world_size) as part:
            part.set_epoch(1)
            seen += [i for images, _ in part for i in ids(images)]
    assert set(seen) == set(range(N)) and len(seen) == N + (-N % world_size)


def test_a_packed_dataset_can_be_cached(identity_tree: Path, tmp_path: Path) -> None:
    pack(identity_tree, tmp_path, "pack.shard_size_mb=0.004")
    overrides = [
        "data=shards",
        f"data.root={tmp_path}",
        "data.cache=ram",
        f"augment.train.crop.size={SIZE}",
        "backend.device=cpu",
    ]
    with build_loader(compose_config(overrides), "train") as cache:
        assert sorted(i for images, _ in cache for i in ids(images)) == list(range(N))


def test_a_dataset_that_does_not_fit_is_refused_before_decoding(
    identity_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cached, "_available_host_bytes", lambda: 1000.0)
    with pytest.raises(ConfigError, match=r"data\.cache=ram: 17 images need .* GiB is free"):
        loader(identity_tree, "data.cache=ram")


def test_a_bad_file_is_named_or_skipped_when_caching(identity_tree: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(identity_tree, root)
    bad = root / "cat" / "zz_broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(DataError, match=r"zz_broken\.jpg"):
        loader(root, "data.cache=ram")
    with loader(root, "data.cache=ram", "data.on_error=skip") as cache:
        assert sorted(i for images, _ in cache for i in ids(images)) == list(range(N))
        assert cache.skipped == 1 and str(bad) in cache.bad_files


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_a_gpu_cache_without_a_gpu_is_a_clear_error(identity_tree: Path) -> None:
    with pytest.raises(DeviceError, match=r"data\.cache=gpu needs"):
        loader(identity_tree, "data.cache=gpu")


@gpu
def test_gpu_cache_matches_the_ram_cache(photos: Path) -> None:
    common = ["data.batch_size=32", "augment.train.crop.size=224", "backend.device=gpu"]
    with loader(photos, *common, "data.cache=gpu") as on_gpu:
        a = epoch(on_gpu, 1)
    with loader(photos, *common, "data.cache=ram") as in_ram:
        b = epoch(in_ram, 1)
    assert a[0].is_cuda and torch.equal(a[1].cpu(), b[1].cpu())
    diff = (a[0].float() - b[0].float()).abs() * 255 * 0.229  # roughly grey levels
    assert diff.mean() < 1.0  # only the crop's edge lines differ (no edge fix on the GPU)


def test_dali_iterator_from_config_refuses_a_cache_it_would_ignore(identity_tree: Path) -> None:
    from dali_pipes import DALIIterator

    cfg = compose_config(["data=folder", f"data.root={identity_tree}", "data.cache=ram"])
    with pytest.raises(ConfigError, match=r"build_loader"):
        DALIIterator.from_config(cfg)


def test_the_gpu_cache_transform_differs_from_the_torch_one_only_at_crop_edges() -> None:
    """The GPU cache's transform (no NumPy edge fix) is device-agnostic: checked on CPU."""
    from dali_pipes.transforms import apply_geometry

    g = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (3, 300, 400), dtype=torch.uint8, generator=g)
    image = torch.nn.functional.avg_pool2d(image[None].float(), 5, 1, 2)[0].to(torch.uint8)
    window, resize, crop, out = (30, 20, 320, 240), (168, 224), (10, 0), (150, 224)
    fast = apply_geometry(image, window, resize, crop, out, exact_edges=False)
    ref = apply_geometry(image, window, resize, crop, out)
    diff = (fast.int() - ref.int()).abs()
    assert fast.shape == ref.shape == (3, 150, 224)
    assert diff[:, 1:-1, 1:-1].max() <= 1, "inside the crop: the same resize"
    assert diff.float().mean() < 0.5
