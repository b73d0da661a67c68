"""Corrupt data never kills a run, distributed epochs are exact, memory stays flat, faults
are reported cleanly, and no config value crashes anything deeper than validation."""

from __future__ import annotations

import csv
import errno
import math
import shutil
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import CORNER, IDENTITY_CLASSES, colour_id, gpu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dali_pipes import ConfigError, DataError, build_loader, compose_config
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.data.manifest import read_manifest
from dali_pipes.data.sources import FolderSource
from dali_pipes.errors import DaliPipesError
from dali_pipes.image.headers import image_size
from dali_pipes.tools.measurement import gpu_used_bytes, host_memory_bytes
from dali_pipes.tools.scan import run_scan
from dali_pipes.train.checkpoints import checkpoint_path, latest, save_atomic

N = sum(IDENTITY_CLASSES.values())
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BACKENDS = ["dali", "torch"]
#: ... and DALI's GPU ("mixed") decoder, where a GPU is present.
WITH_GPU = [*BACKENDS, pytest.param("dali-gpu", marks=gpu)]
# Corner files every decoder here rejects, one of each kind (relative to corner/).
BAD = [
    "empty_or_stub/jd__empty.jpg",
    "truncated/pillow__truncated_jpeg.jpg",
    "huge_header/jd__max_size.jpg",
    "zero_dim/jd__null_height.jpg",
    "corrupt/jd__derive-huffman-codes-overflow.jpg",
]


@pytest.fixture(scope="module")
def corner() -> Path:
    if not CORNER.is_dir():
        pytest.skip(f"corner-case files not found at {CORNER}")
    return CORNER


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging."""

    def expire(*_: object) -> None:
        raise TimeoutError(f"no result within {seconds} s: hung")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cfg_for(root: Path, backend: str, *extra: str) -> Any:
    """A small-crop folder config; ``dali-gpu`` is DALI decoding on the GPU."""
    return compose_config(
        [
            "data=folder",
            f"data.root={root}",
            f"backend={backend.removesuffix('-gpu')}",
            f"backend.device={'gpu' if backend.endswith('-gpu') else 'cpu'}",
            "data.batch_size=4",
            "augment.train.crop.size=32",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            *(["backend.num_workers=1"] if backend == "torch" else []),
            *extra,
        ]
    )


def ids(images: torch.Tensor) -> list[int]:
    std = torch.tensor(STD).view(1, 3, 1, 1) * 255
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    rgb = (images.float().cpu() * std + mean).mean(dim=(2, 3)).numpy()
    return [colour_id(c) for c in rgb]


@pytest.fixture
def mixed_tree(identity_tree: Path, corner: Path, tmp_path: Path) -> Path:
    """The identity tree with known-bad corner files mixed into its class folders."""
    root = tmp_path / "mixed"
    shutil.copytree(identity_tree, root)
    for k, rel in enumerate(BAD):
        shutil.copy(corner / rel, root / list(IDENTITY_CLASSES)[k % 3] / f"zz_bad_{k}.jpg")
    return root


# --------------------------------------------------------------------------- corner files


def test_scan_lists_every_corner_file_and_never_accepts_what_pillow_rejects(
    corner: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bad.csv"
    cfg = compose_config(
        ["data=folder", f"data.root={corner}", f"scan.out={out}", "scan.splits=[train]"],
        config_name="scan",
    )
    with deadline(300):
        report = run_scan(cfg)
    rows = list(csv.DictReader((corner.parent / "corner.csv").open()))
    listed = [r for r in rows if not r["file"].endswith(".mpo")]  # not an image extension
    assert report["files"] == len(listed)
    bad = read_manifest(out)
    assert len(bad) == report["bad"] and all(bad.values())
    table: dict[str, Counter[str]] = {}
    for r in listed:
        path = str((corner / r["class"] / r["file"]).resolve())
        pil = "pil-ok" if r["pillow_decode"] == "ok" else "pil-fail"
        ours = "rejected" if path in bad else "accepted"
        table.setdefault(r["class"], Counter())[f"{pil}/{ours}"] += 1
        if pil == "pil-fail":
            assert path in bad, f"scan accepted {path}, which Pillow cannot decode"
    with capsys.disabled():
        print(f"\nscan of corner/: {report['good']} accepted, {report['bad']} rejected")
        for name, counts in sorted(table.items()):
            print(f"  {name:24s} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


@pytest.mark.slow
def test_after_scan_and_exclude_a_dali_run_over_every_corner_file_meets_no_decoder_error(
    corner: Path, tmp_path: Path
) -> None:
    """scan decodes with DALI's decoder too (the configured backend's), so files that
    libjpeg-turbo accepts and DALI rejects (junk before a frame header) are in the
    manifest, and the default data.on_error=raise never fires."""
    # corner/ without its mpo/ folder, which has no file with an image extension: under
    # raise that is a layout error (as for ImageFolder), not a decoder error.
    root = tmp_path / "corner"
    shutil.copytree(corner, root, ignore=lambda d, names: ["mpo"] if Path(d) == corner else [])
    out = tmp_path / "bad.csv"
    with deadline(300):
        run_scan(
            compose_config(
                ["data=folder", f"data.root={root}", f"scan.out={out}", "backend=dali"],
                config_name="scan",
            )
        )
    bad = read_manifest(out)
    dali_only = [p for p, reason in bad.items() if reason.startswith("DALI's CPU decoder")]
    assert any("markers" in p for p in dali_only), dali_only
    for split in ("train", "val"):
        loader = build_loader(cfg_for(root, "dali", f"data.exclude={out}"), split)
        with deadline(300):
            seen = sum(len(labels) for _, labels in loader)
        assert seen == loader.sampler.num_items and loader.skipped == 0
        loader.close()


@pytest.mark.slow
@pytest.mark.parametrize("train", [False, True], ids=["val", "train"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_corner_file_goes_through_both_backends_with_drop(
    corner: Path, backend: str, train: bool
) -> None:
    # on_error=drop is the old skip (left out, the batch shrinks): this accounting is its
    # own; skip's substitutes are tests/e2e/test_substitutes.py's.
    loader = build_loader(
        cfg_for(corner, backend, "data.on_error=drop"), "train" if train else "val"
    )
    seen = 0
    with deadline(300):
        for images, labels in loader:
            assert images.shape[1:] == (3, 32, 32) and torch.isfinite(images.float()).all()
            assert len(images) == len(labels)
            seen += len(labels)
    assert isinstance(loader.spec.source, FolderSource)
    files = len(loader.spec.source.files)
    assert seen + loader.skipped == files, "every listed file is either yielded or skipped"
    assert loader.skipped == len(loader.bad_files) > 100
    assert all(reason for reason in loader.bad_files.values())
    truncated = str(corner / "truncated" / "pillow__truncated_jpeg.jpg")
    assert truncated in loader.bad_files


@pytest.mark.parametrize("backend", WITH_GPU)
def test_bad_files_mixed_into_good_data_leave_every_good_sample_exactly_once(
    mixed_tree: Path, backend: str
) -> None:
    loader = build_loader(cfg_for(mixed_tree, backend, "data.on_error=drop"), "train")
    with deadline(120):
        for epoch in (0, 1):
            loader.set_epoch(epoch)
            got = sorted(i for images, _ in loader for i in ids(images))
            assert got == list(range(N))
            assert loader.skipped == len(BAD)
    assert sorted(Path(p).name for p in loader.bad_files) == [
        f"zz_bad_{k}.jpg" for k in range(len(BAD))
    ]


@gpu
@pytest.mark.slow
def test_the_gpu_decoder_skips_every_corner_file_it_cannot_decode_and_stays_usable(
    corner: Path, real_photos: Path, tmp_path: Path
) -> None:
    """Real photos with all of corner/ mixed in, DALI's "mixed" (nvJPEG) decoder, skip: the
    epoch ends, every photo is yielded, every file not yielded is named with a reason, and
    CUDA still works after it (a decoder fault would leave a sticky error behind)."""
    root = tmp_path / "mixed"
    shutil.copytree(real_photos, root)
    for path in corner.rglob("*"):
        if path.is_file():
            (into := root / f"corner_{path.parent.name}").mkdir(exist_ok=True)
            shutil.copy(path, into / path.name)
    loader = build_loader(cfg_for(root, "dali-gpu", "data.on_error=skip"), "train")
    assert isinstance(loader.spec.source, FolderSource)
    files, classes = loader.spec.source.files, loader.spec.source.classes
    good = sum(1 for f in files if not Path(f).parent.name.startswith("corner_"))
    with deadline(600):
        for epoch in (0, 1):
            loader.set_epoch(epoch)
            labels = torch.cat([y.cpu() for _, y in loader])
            yielded_good = sum(not classes[i].startswith("corner_") for i in labels.tolist())
            assert yielded_good == good, "every photo is yielded"
            assert len(labels) + loader.skipped == len(files)
    # nvJPEG need not reject exactly what libjpeg-turbo rejects (lossless JPEG, say), so the
    # files named are checked for accounting, not counted against the CPU's 118; two that
    # no decoder can read must be among them.
    assert loader.skipped == len(loader.bad_files) and all(loader.bad_files.values())
    assert all(Path(p).parent.name.startswith("corner_") for p in loader.bad_files)
    named = {Path(p).name for p in loader.bad_files}
    assert {"jd__empty.jpg", "pillow__truncated_jpeg.jpg"} <= named
    assert torch.ones(4, device="cuda").sum().item() == 4.0  # no sticky CUDA error
    torch.cuda.synchronize()
    print(f"\ncorner on the GPU decoder: {loader.skipped} of {len(files) - good} skipped")
    loader.close()


@pytest.mark.parametrize("backend", WITH_GPU)
def test_on_error_raise_names_the_first_bad_file(mixed_tree: Path, backend: str) -> None:
    loader = build_loader(cfg_for(mixed_tree, backend), "val")
    with deadline(120), pytest.raises(DataError) as exc:
        list(loader)
    assert "zz_bad_" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.slow
def test_a_scan_manifest_removes_bad_files_before_sharding(
    mixed_tree: Path, tmp_path: Path
) -> None:
    manifest = tmp_path / "bad.csv"
    run_scan(
        compose_config(
            ["data=folder", f"data.root={mixed_tree}", f"scan.out={manifest}"], config_name="scan"
        )
    )
    assert len(read_manifest(manifest)) == len(BAD)
    for rank in (0, 1):
        loader = build_loader(
            cfg_for(mixed_tree, "dali", f"data.exclude={manifest}"),
            "train",
            rank=rank,
            world_size=2,
        )
        assert loader.sampler.num_items == N and len(loader.bad_files) == len(BAD)
        list(loader)
        assert loader.skipped == 0


def test_a_small_scan_checks_in_this_process_and_finds_what_a_pool_of_workers_finds(
    mixed_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under 256 files (and ``scan.workers`` null) no pool starts: its workers would cost
    more than the files. The reasons are the same either way, and this process keeps its
    torch threads (a worker checks with one)."""
    from dali_pipes.tools import scan

    pools: list[int] = []
    real_pool = scan.fresh_pool

    def counted(processes: int, *args: Any) -> Any:
        pools.append(processes)
        return real_pool(processes, *args)

    monkeypatch.setattr(scan, "fresh_pool", counted)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        reports = [
            run_scan(
                compose_config(
                    [
                        "data=folder",
                        f"data.root={mixed_tree}",
                        f"scan.out={tmp_path / name}",
                        *extra,
                    ],
                    config_name="scan",
                )
            )
            for name, extra in (("here.csv", []), ("pool.csv", ["scan.workers=2"]))
        ]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert pools == [2]
    here, pool = reports
    assert here["bad_files"] == pool["bad_files"] and len(here["bad_files"]) == len(BAD)
    assert here["files"] == pool["files"] < scan.POOL_FROM


def test_a_header_claiming_65535_by_65535_pixels_is_refused_before_decoding(corner: Path) -> None:
    data = (corner / "huge_header" / "jd__max_size.jpg").read_bytes()
    with pytest.raises(DataError, match=r"data\.max_pixels=100000000"):
        image_size(data, "huge.jpg", max_pixels=100_000_000)
    assert image_size(data, "huge.jpg", max_pixels=65535 * 65535) == (65535, 65535)  # configurable


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("on_error", ["skip", "drop", "raise"])
def test_a_file_deleted_mid_epoch_is_handled_like_a_decode_error(
    identity_tree: Path, tmp_path: Path, backend: str, on_error: str
) -> None:
    root = tmp_path / "data"
    shutil.copytree(identity_tree, root)
    loader = build_loader(
        cfg_for(root, backend, f"data.on_error={on_error}", "data.batch_size=1"), "val"
    )
    assert isinstance(loader.spec.source, FolderSource)
    victim = loader.spec.source.files[-1]
    batches = iter(loader)
    first = next(batches)
    Path(victim).unlink()
    with deadline(120):
        if on_error == "raise":
            with pytest.raises(DataError, match="cannot read"):
                list(batches)
            return
        rest = list(batches)
    # drop leaves the file out; skip puts a substitute in its slot
    assert len(first[1]) + sum(len(b[1]) for b in rest) == (N - 1 if on_error == "drop" else N)
    assert "cannot read" in loader.bad_files[victim]


# --------------------------------------------------------------------------- distribution


@pytest.mark.slow
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_distributed_epochs_are_exact_for_world_sizes_1_to_8(
    identity_tree: Path, backend: str, drop_last: bool
) -> None:
    # Composed once (Hydra takes ~0.1 s a time); every rank still gets a fresh loader.
    cfg = cfg_for(
        identity_tree, backend, f"data.drop_last={drop_last}", "data.batch_size=2", "seed=5"
    )

    def shards(world: int, epoch: int) -> list[list[int]]:
        out = []
        for rank in range(world):
            loader = build_loader(cfg, "train", rank=rank, world_size=world)
            loader.set_epoch(epoch)
            out.append([i for images, _ in loader for i in ids(images)])
            assert len(out[-1]) == 2 * len(loader) or not drop_last
        return out

    for world in range(1, 9):
        first = shards(world, 1)
        lengths = {len(s) for s in first}
        assert len(lengths) == 1, f"world {world}: ranks yield different numbers of samples"
        seen = [i for s in first for i in s]
        if drop_last:
            assert len(seen) == len(set(seen))
        else:
            assert set(seen) == set(range(N)) and len(seen) == N + (-N % world)
        assert shards(world, 1) == first, "the order is a pure function of (seed, epoch)"
        assert shards(world, 2) != first, "the order changes between epochs"


# --------------------------------------------------------------------------- memory


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_host_memory_stays_flat_over_30_epochs(backend: str) -> None:
    cfg = compose_config(
        [
            f"backend={backend}",
            "backend.device=cpu",
            "data.train_per_class=40",
            *(["backend.num_workers=2"] if backend == "torch" else []),
        ]
    )
    loader = build_loader(cfg, "train")
    samples = []
    for epoch in range(30):
        loader.set_epoch(epoch)
        for _ in loader:
            pass
        samples.append(host_memory_bytes())
    # The main process's and the DataLoader workers' allocators warm up over the first
    # 8-15 epochs (torch backend alone: the main process's anonymous memory 144 -> 215 MB
    # by epoch 7, then 191-212 MB; each worker's 140 -> 172 MB by epoch 15, then flat),
    # which is not a leak; a leak keeps growing through the last 20 epochs.
    settled = samples[9]
    growth = max(samples[10:]) / settled - 1
    print(
        f"\n{backend}: PSS after epoch 10 {settled / 2**20:.0f} MB, "
        f"max growth over the next 20 {100 * growth:.1f} %"
    )
    assert growth < 0.05, [round(s / 2**20) for s in samples]
    loader.close()


@gpu
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_gpu_memory_stays_flat_over_30_epochs(backend: str) -> None:
    """Device-wide GPU memory in use (``cudaMemGetInfo``: DALI's own pools included, which
    torch's allocator statistics do not see) after each of 30 epochs of GPU batches."""
    cfg = compose_config(
        [f"backend={backend}", "backend.device=gpu", "data.train_per_class=40"]
        + (["backend.num_workers=2"] if backend == "torch" else [])
    )
    before = gpu_used_bytes()
    loader = build_loader(cfg, "train")
    samples = []
    for epoch in range(30):
        loader.set_epoch(epoch)
        for images, _ in loader:
            assert images.is_cuda
        torch.cuda.synchronize()
        samples.append(gpu_used_bytes() - before)
    # DALI's memory pools and torch's caching allocator grow to their working set over the
    # first epochs, and a rare large batch can raise a pool later by one chunk; a leak grows
    # every epoch, so the last 10 epochs' peak exceeds the 10 before them.
    middle, last = max(samples[10:20]), max(samples[20:])
    mb = [round(s / 2**20) for s in samples]
    print(f"\n{backend} on the GPU: MB in use above the start, per epoch: {mb}")
    assert last <= middle + max(0.05 * middle, 16 * 2**20), mb
    loader.close()


# --------------------------------------------------------------------------- faults


def test_a_full_disk_gives_a_clear_error_and_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "checkpoints"
    save_atomic({"epoch": 0}, checkpoint_path(directory, 0))

    def full(obj: Any, f: Any) -> None:
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(DaliPipesError, match="No space left on device") as exc:
        save_atomic({"epoch": 1}, checkpoint_path(directory, 1))
    assert "\n" not in str(exc.value)
    assert sorted(p.name for p in directory.iterdir()) == ["epoch_0000.pt"], "no partial file"
    monkeypatch.undo()
    assert latest(directory) == checkpoint_path(directory, 0)
    assert torch.load(checkpoint_path(directory, 0))["epoch"] == 0


# --------------------------------------------------------------------------- config fuzzing

VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.lists(st.one_of(st.integers(-5, 5), st.floats(-2, 2)), max_size=4),
)
KEYS = [
    "data.batch_size",
    "data.drop_last",
    "data.on_error",
    "data.max_pixels",
    "data.num_samples",
    "data.num_classes",
    "augment.train.crop.size",
    "augment.train.crop.scale",
    "augment.train.crop.ratio",
    "augment.train.ops.hflip.p",
    "augment.val.crop.resize",
    "augment.val.crop.size",
    "augment.train.crop",
    "augment.train.ops",
    "+augment.train.ops.randaugment.magnitude",
    "+augment.train.ops.randaugment.num_ops",
    "+augment.train.ops.color_jitter.hue",
    "+augment.train.ops.gaussian_blur.kernel_size",
    "+augment.train.ops.gaussian_blur.sigma",
    "augment.mean",
    "augment.std",
    "augment.dtype",
    "augment.channels_last",
    "backend.device",
    "backend.num_threads",
    "backend.prefetch_queue_depth",
    "backend.hw_decoder_load",
    "backend.read_ahead",
    "trainer.epochs",
    "trainer.base_lr",
    "trainer.momentum",
    "trainer.amp",
    "trainer.warmup_epochs",
    "seed",
]


def _override(key: str, value: Any) -> str:
    if value is None:
        return f"{key}=null"
    if isinstance(value, str):
        return f"{key}='{value}'" if value.isidentifier() else f"{key}={value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{key}={'nan' if math.isnan(value) else ('inf' if value > 0 else '-inf')}"
    if isinstance(value, list):
        return f"{key}=[{','.join(str(v) for v in value)}]"
    return f"{key}={str(value).lower() if isinstance(value, bool) else value}"


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(KEYS), VALUES)
def test_config_fuzzing_gives_validation_errors_never_crashes(key: str, value: Any) -> None:
    try:
        cfg = compose_config(["data=synthetic", _override(key, value)])
        loader_spec(cfg, "train")  # data, augment, backend and the top-level seed
        to_spec(cfg.trainer, TrainerSpec)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc)


def test_a_missing_manifest_is_a_one_line_error(tmp_path: Path, identity_tree: Path) -> None:
    with pytest.raises(DataError, match=r"run python -m dali_pipes\.scan first"):
        build_loader(cfg_for(identity_tree, "dali", f"data.exclude={tmp_path / 'missing.csv'}"))


def test_training_with_skip_counts_bad_files_in_the_epoch_summary(
    mixed_tree: Path, tmp_path: Path
) -> None:
    from dali_pipes.train.run import train

    cfg = compose_config(
        [
            "data=folder",
            f"data.root={mixed_tree}",
            "data.on_error=skip",
            "data.batch_size=4",
            "augment=small",
            "model=small_cnn",
            "trainer=quick",
            "trainer.epochs=2",
            "backend.device=cpu",
            f"output_dir={tmp_path}",
        ]
    )
    row = train(cfg)
    # every bad file's slot holds a substitute: the epoch keeps its N + len(BAD) samples
    assert row["skipped"] == len(BAD) and row["samples"] == N + len(BAD)
    with (tmp_path / "metrics.csv").open() as f:
        assert [int(r["skipped"]) for r in csv.DictReader(f)] == [len(BAD), len(BAD)]
    assert f"{len(BAD)} bad files skipped" in (tmp_path / "train.log").read_text()
    # listed as a scan manifest, which data.exclude takes
    listed = read_manifest(tmp_path / "bad_files.csv")
    assert sorted(Path(p).name for p in listed) == [f"zz_bad_{k}.jpg" for k in range(len(BAD))]


def test_bad_files_of_either_split_are_counted_and_each_is_reported_once_per_run(
    mixed_tree: Path, identity_tree: Path, tmp_path: Path
) -> None:
    """Bad files only in val/ count in the epoch's ``skipped``; with data=folder both
    splits read the same files, and each bad one is still reported (and counted) once."""
    from dali_pipes.train.run import train

    common = [
        "data.on_error=skip",
        "data.batch_size=4",
        "augment=small",
        "model=small_cnn",
        "trainer=quick",
        "trainer.epochs=1",
        "backend.device=cpu",
    ]
    layout = tmp_path / "imagenet"
    shutil.copytree(identity_tree, layout / "train")
    shutil.copytree(mixed_tree, layout / "val")
    row = train(
        compose_config(
            ["data=imagenet", f"data.root={layout}", *common, f"output_dir={tmp_path / 'a'}"]
        )
    )
    assert row["skipped"] == len(BAD)
    train(
        compose_config(
            ["data=folder", f"data.root={mixed_tree}", *common, f"output_dir={tmp_path / 'b'}"]
        )
    )
    log = (tmp_path / "b" / "train.log").read_text()
    for k in range(len(BAD)):
        assert log.count(f"skipping {mixed_tree}/") == len(BAD)
        assert log.count(f"zz_bad_{k}.jpg:") == 1
