"""``data.cache=ram|gpu``: decode once, augment from memory, same samples and pixels."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import BUNDLED_PHOTOS, gpu
from helpers.identity import SIZE, N, epoch, ids
from helpers.shards import pack

from dali_pipes import build_loader, compose_config
from dali_pipes.backends.cache import store as decoded
from dali_pipes.errors import ConfigError, DataError, DeviceError
from dali_pipes.selfcheck.bounds import CACHE_GPU_VS_RAM


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
    monkeypatch.setattr(decoded, "_available_host_bytes", lambda: 1000.0)
    with pytest.raises(ConfigError, match=r"data\.cache=ram: 17 images need .* GiB is free"):
        loader(identity_tree, "data.cache=ram")


def test_a_bad_file_is_named_or_skipped_when_caching(identity_tree: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(identity_tree, root)
    bad = root / "cat" / "zz_broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(DataError, match=r"zz_broken\.jpg"):
        loader(root, "data.cache=ram")
    with loader(root, "data.cache=ram", "data.on_error=drop") as cache:
        assert sorted(i for images, _ in cache for i in ids(images)) == list(range(N))
        assert cache.skipped == 1 and str(bad) in cache.bad_files


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_a_gpu_cache_without_a_gpu_is_a_clear_error(identity_tree: Path) -> None:
    with pytest.raises(DeviceError, match=r"data\.cache=gpu needs"):
        loader(identity_tree, "data.cache=gpu")


@gpu
@pytest.mark.slow
def test_gpu_cache_matches_the_ram_cache(photos: Path) -> None:
    common = ["data.batch_size=32", "augment.train.crop.size=224", "backend.device=gpu"]
    with loader(photos, *common, "data.cache=gpu") as on_gpu:
        on_gpu.set_epoch(1)
        next(iter(on_gpu))  # an epoch left after one batch, then run whole
        a = epoch(on_gpu, 1)
    with loader(photos, *common, "data.cache=ram") as in_ram:
        b = epoch(in_ram, 1)
    assert a[0].is_cuda and torch.equal(a[1].cpu(), b[1].cpu())
    diff = (a[0].float() - b[0].float()).abs() * 255 * 0.229  # roughly grey levels
    # The same decode; DALI's GPU resize and ops against the torch emulation of its CPU ones.
    assert diff.mean() < CACHE_GPU_VS_RAM.mean


@gpu
def test_the_ram_cache_hands_a_gpu_model_the_same_batches_it_gives_a_cpu_model(
    identity_tree: Path,
) -> None:
    """Batches stacked into pinned memory and copied on the prefetcher's side stream."""
    with (
        loader(identity_tree, "data.cache=ram", "trainer.device=cuda") as to_gpu,
        loader(identity_tree, "data.cache=ram", "trainer.device=cpu") as to_cpu,
    ):
        for n in (0, 1):
            a, b = epoch(to_gpu, n), epoch(to_cpu, n)
            assert a[0].is_cuda and a[1].is_cuda
            assert torch.equal(a[0].cpu(), b[0]) and torch.equal(a[1].cpu(), b[1])


def dali_cached(root: Path, *extra: str, split: str = "train") -> Any:
    """The loader ``data.cache=gpu`` builds, on the CPU: the same DALI graph, run there."""
    from dali_pipes.backends.cache.gpu import DaliCachedLoader
    from dali_pipes.config.specs import loader_spec

    overrides = ["data=folder", f"data.root={root}", "data.batch_size=4", "seed=2", *extra]
    return DaliCachedLoader(loader_spec(compose_config(overrides), split))


@pytest.mark.parametrize(
    ("augment", "split"),
    [("imagenet", "train"), ("imagenet", "val"), ("randaugment", "train")],
)
def test_the_gpu_caches_dali_graph_gives_exactly_dalis_batches(
    real_photos: Path, augment: str, split: str
) -> None:
    """Its slice of the cached image + DALI's resize, ops and normalisation equal DALI's
    decode of the window + the same graph, batch for batch, over two epochs."""
    common = [f"augment={augment}", "augment.train.crop.size=64", "backend.device=cpu"]
    with (
        dali_cached(real_photos, *common, split=split) as cache,
        loader(real_photos, *common, "backend=dali", split=split) as ref,
    ):
        for n in (0, 1):
            a, b = epoch(cache, n), epoch(ref, n)
            assert torch.equal(a[1], b[1])
            assert torch.equal(a[0], b[0])


def test_the_gpu_caches_dali_graph_skips_or_names_a_bad_file(
    identity_tree: Path, tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    shutil.copytree(identity_tree, root)
    bad = root / "cat" / "zz_broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    common = [f"augment.train.crop.size={SIZE}", "backend.device=cpu"]
    with pytest.raises(DataError, match=r"zz_broken\.jpg"):
        dali_cached(root, *common)
    with dali_cached(root, *common, "data.on_error=drop") as cache:
        for n in (0, 1):
            assert sorted(ids(epoch(cache, n)[0])) == list(range(N))
            assert cache.skipped == 1 and str(bad) in cache.bad_files


@pytest.mark.parametrize("depth", [1, 3])
def test_the_gpu_caches_dali_graph_restarts_after_a_break_and_resumes_mid_epoch(
    real_photos: Path, depth: int
) -> None:
    """The two-callback feed stays paired through DALI's prefetching: an epoch left after
    two batches and started again, or resumed from the loader state, gives the reference
    epoch's batches."""
    common = [
        "augment.train.crop.size=64",
        "backend.device=cpu",
        f"backend.prefetch_queue_depth={depth}",
    ]
    with loader(real_photos, *common, "backend=dali") as ref:
        ref.set_epoch(1)
        expected = list(ref)
    with dali_cached(real_photos, *common) as cache:
        cache.set_epoch(1)
        for k, _ in enumerate(cache):
            if k == 1:
                break
        state = cache.state_dict()
        cache.set_epoch(1)
        again = list(cache)
        cache.load_state_dict(state)
        rest = list(cache)
    assert len(again) == len(expected) and len(rest) == len(expected) - 2
    for (a, la), (b, lb) in zip(expected, again, strict=True):
        assert torch.equal(a, b) and torch.equal(la, lb)
    for (a, la), (b, lb) in zip(expected[2:], rest, strict=True):
        assert torch.equal(a, b) and torch.equal(la, lb)


def test_dali_iterator_from_config_refuses_a_cache_it_would_ignore(identity_tree: Path) -> None:
    from dali_pipes import DALIIterator

    cfg = compose_config(["data=folder", f"data.root={identity_tree}", "data.cache=ram"])
    with pytest.raises(ConfigError, match=r"build_loader"):
        DALIIterator.from_config(cfg)


# ------------------------------------------------------------ data.cache_max_side

#: Below some of the real photos' long sides (1280, 681, 680 px) and at or above the rest's.
MAX_SIDE = 640


#: The max-side tests' photos: the 13 shipped in the package (baseline and progressive, six
#: chroma subsamplings, some larger than MAX_SIDE and some not). What they check, the cache
#: against the same pipeline on the resized copies, does not grow with the number of photos
#: (the caches' parity over the whole shared set is the tests above).
MAX_SIDE_PHOTOS = BUNDLED_PHOTOS


@pytest.fixture(scope="module")
def held_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The photos shipped in the package as ``data.cache_max_side=MAX_SIDE`` holds them,
    written losslessly (PNG, named ``<its name>.png``, so in the same ImageFolder order):
    each one decoded and then fitted within ``MAX_SIDE``."""
    from PIL import Image

    from dali_pipes.image.decode import decode
    from dali_pipes.image.stored_size import fitted

    out = tmp_path_factory.mktemp("held")
    for path in sorted(p for p in MAX_SIDE_PHOTOS.glob("*/*") if p.suffix in (".jpg", ".jpeg")):
        image = fitted(decode(str(path)), MAX_SIDE).permute(1, 2, 0).numpy()
        (out / path.parent.name).mkdir(exist_ok=True)
        Image.fromarray(image).save(out / path.parent.name / f"{path.name}.png")
    return out


def test_a_cache_max_side_holds_each_image_fitted_within_it() -> None:
    from dali_pipes.image.decode import decode

    with loader(MAX_SIDE_PHOTOS, "data.cache=ram", f"data.cache_max_side={MAX_SIDE}") as cache:
        source = cache.spec.source
        resized = 0
        for i, held in enumerate(cache.images):
            original = decode(source.name(i))
            h, w = original.shape[-2:]
            assert max(held.shape[-2:]) == min(MAX_SIDE, max(h, w))
            assert abs(held.shape[-2] / held.shape[-1] - h / w) < 0.01
            if max(h, w) <= MAX_SIDE:
                assert torch.equal(held, original)
            resized += max(h, w) > MAX_SIDE
        assert 0 < resized < len(cache.images)


def test_a_ram_cache_with_a_max_side_gives_the_torch_backends_batches_of_the_fitted_images(
    held_copy: Path,
) -> None:
    common = ["augment.train.crop.size=64"]
    side = f"data.cache_max_side={MAX_SIDE}"
    with (
        loader(MAX_SIDE_PHOTOS, *common, "data.cache=ram", side) as cache,
        loader(held_copy, *common, "backend=torch", "backend.num_workers=0") as ref,
    ):
        for n in (0, 1):
            a, b = epoch(cache, n), epoch(ref, n)
            assert torch.equal(a[1], b[1]) and torch.equal(a[0], b[0])


def test_the_gpu_caches_dali_graph_with_a_max_side_gives_dalis_batches_of_the_fitted_images(
    held_copy: Path,
) -> None:
    common = ["augment.train.crop.size=64", "backend.device=cpu"]
    side = f"data.cache_max_side={MAX_SIDE}"
    with (
        dali_cached(MAX_SIDE_PHOTOS, *common, "data.cache=gpu", side) as cache,
        loader(held_copy, *common, "backend=dali") as ref,
    ):
        for n in (0, 1):
            a, b = epoch(cache, n), epoch(ref, n)
            assert torch.equal(a[1], b[1]) and torch.equal(a[0], b[0])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.cache_max_side=512"], r"data\.cache_max_side=512 .* set data\.cache=ram or gpu"),
        (["data.cache=ram", "data.cache_max_side=0"], r"data\.cache_max_side=0 .* must be >= 1"),
    ],
)
def test_a_cache_max_side_without_a_cache_or_below_one_is_refused(
    identity_tree: Path, overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        loader(identity_tree, *overrides)


def test_a_cache_max_side_below_the_training_crop_is_warned_once(
    identity_tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def warned(side: int) -> list[str]:
        caplog.clear()
        with (
            caplog.at_level(logging.WARNING),
            loader(identity_tree, "data.cache=ram", f"data.cache_max_side={side}"),
        ):
            pass
        return [r.getMessage() for r in caplog.records if "cache_max_side" in r.getMessage()]

    [warning] = warned(SIZE - 1)
    assert f"data.cache_max_side={SIZE - 1}" in warning and f"{SIZE} or more" in warning
    assert warned(SIZE) == []


def test_with_views_the_largest_views_crop_is_the_one_a_cache_max_side_is_held_against(
    identity_tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    views = ["augment=dino", "augment.train.crop.size=48", "augment.train.views.local.crop.size=24"]
    with (
        caplog.at_level(logging.WARNING),
        loader(identity_tree, *views, "data.cache=ram", "data.cache_max_side=40"),
    ):
        pass
    [warning] = [r.getMessage() for r in caplog.records if "cache_max_side" in r.getMessage()]
    assert "48 px training crop" in warning
