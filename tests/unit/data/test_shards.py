"""Packed datasets: pack, read back through every backend, resume an interrupted pack."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import IDENTITY_CLASSES, REPO
from helpers.identity import SIZE, N, ids
from helpers.shards import pack
from helpers.warm import python

from dali_pipes import build_loader, compose_config
from dali_pipes.data.sampling import StreamSampler
from dali_pipes.data.shards import MANIFEST, PLAN, open_split
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.tools.pack import run_pack

ROOT = REPO
BACKENDS = ["torch", "dali-cpu"]
LABELS = np.repeat(np.arange(len(IDENTITY_CLASSES)), list(IDENTITY_CLASSES.values()))


def tars(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.rglob("*.tar"))}


@pytest.fixture(scope="module")
def packed(identity_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The identity tree in shards of ~3 samples, so there are several."""
    out = tmp_path_factory.mktemp("packed")
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    return out


def shard_loader(
    kind: str,
    out: Path,
    *,
    batch_size: int = 4,
    drop_last: bool = False,
    seed: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> Any:
    """Like test_contract.make, reading the packed tree."""
    backend, _, where = kind.partition("-")
    overrides = [
        "data=shards",
        f"data.root={out}",
        "data.shuffle_buffer=4",
        f"data.batch_size={batch_size}",
        f"data.drop_last={drop_last}",
        f"seed={seed}",
        f"backend={backend}",
        f"backend.device={where or 'cpu'}",
        f"augment.train.crop.size={SIZE}",
    ]
    if backend == "torch":
        overrides.append("backend.num_workers=1")
    return build_loader(compose_config(overrides), "train", rank=rank, world_size=world_size)


def test_pack_writes_several_shards_with_every_sample_and_its_label(packed: Path) -> None:
    names, labels, classes, layout = open_split(packed, "train")
    assert layout.num_shards >= 4
    assert classes == list(IDENTITY_CLASSES)
    source_index = [int(n.rsplit(":s", 1)[1].split(".")[0]) for n in names]
    assert sorted(source_index) == list(range(N))
    assert (labels == LABELS[source_index]).all()
    assert source_index != sorted(source_index), "samples are shuffled across shards"


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("kind", BACKENDS)
def test_shards_read_back_every_sample_once_per_epoch_disjoint_across_ranks(
    kind: str, world_size: int, drop_last: bool, packed: Path
) -> None:
    per_rank, counts = [], set()
    for rank in range(world_size):
        loader = shard_loader(
            kind, packed, batch_size=2, drop_last=drop_last, rank=rank, world_size=world_size
        )
        loader.set_epoch(2)
        batches = [(ids(x), y.tolist()) for x, y in loader]
        counts.add(len(batches))
        assert len(batches) == len(loader)
        got = [(i, label) for b, labels in batches for i, label in zip(b, labels, strict=True)]
        assert all(label == LABELS[i] for i, label in got), "labels follow their samples"
        per_rank.append([i for i, _ in got])
    assert len(counts) == 1, "every rank yields the same number of batches"
    seen = [i for rank in per_rank for i in rank]
    if drop_last:
        assert len(seen) == len(set(seen)), "ranks overlap"
    else:
        assert set(seen) == set(range(N))
        assert len(seen) == N + (-N % world_size)
        counts_per_sample = np.bincount(seen, minlength=N)
        assert (counts_per_sample == 2).sum() == -N % world_size, "only the padding repeats"


def test_both_backends_read_shards_in_the_same_order_set_by_seed_and_epoch(packed: Path) -> None:
    def order(kind: str, epoch: int, seed: int = 5) -> list[int]:
        loader = shard_loader(kind, packed, seed=seed)
        loader.set_epoch(epoch)
        return [i for x, _ in loader for i in ids(x)]

    assert order("torch", 0) == order("dali-cpu", 0)
    assert order("torch", 1) == order("dali-cpu", 1)
    assert order("torch", 0) != order("torch", 1)
    assert order("torch", 1) != order("torch", 1, seed=6)
    assert sorted(order("torch", 3)) == list(range(N))


@pytest.mark.parametrize("kind", BACKENDS)
def test_resuming_a_shard_epoch_part_way_gives_the_rest_of_that_epoch(
    kind: str, packed: Path
) -> None:
    loader = shard_loader(kind, packed, batch_size=2, seed=4)
    loader.set_epoch(3)
    whole = [ids(x) for x, _ in loader]
    loader.set_epoch(3, start_batch=5)
    assert [ids(x) for x, _ in loader] == whole[5:]


def test_the_dali_backend_reads_shards_with_dalis_webdataset_reader(packed: Path) -> None:
    loader = shard_loader("dali-cpu", packed)
    assert loader._feed.stream is not None  # white-box: which reader feeds the pipeline
    for tar in packed.rglob("*.tar"):  # the positioned reader would still work without these
        tar.with_suffix(".idx").rename(tar.with_suffix(".idx.away"))
    try:
        # DALI's reader needs the index: said in one line, with the command that writes it.
        with pytest.raises(DataError, match=r"\.idx: shard index missing.*wds2idx"):
            list(loader)
    finally:
        for away in packed.rglob("*.idx.away"):
            away.rename(away.with_suffix("").with_suffix(".idx"))


def test_each_rank_reads_a_contiguous_run_of_shards(packed: Path) -> None:
    *_, layout = open_split(packed, "train", shuffle_buffer=8)
    for world in (2, 3):
        for epoch in (0, 1):
            owned = []
            for rank in range(world):
                spec = SamplingSpec(seed=1, rank=rank, world_size=world, drop_last=True)
                mine = StreamSampler(N, spec, layout).indices(epoch)
                owned.append(set(layout.shard[mine].tolist()))
            for a in range(world):
                for b in range(a + 1, world):
                    assert len(owned[a] & owned[b]) <= 1, "ranks share at most a boundary shard"


def test_shards_give_the_same_images_as_the_folder_for_each_sample(
    photos: Path, tmp_path: Path
) -> None:
    """Same geometry per sample (it follows the sample, not the file), so same pixels."""
    out = tmp_path / "photos"
    pack(photos, out, "pack.shard_size_mb=4")
    names, *_ = open_split(out, "val")
    source_index = [int(n.rsplit(":s", 1)[1].split(".")[0]) for n in names]
    common = ["data.batch_size=32", "backend.device=cpu", "backend=dali"]
    folder = compose_config(["data=folder", f"data.root={photos}", *common])
    shards = compose_config(["data=shards", f"data.root={out}", *common])
    with build_loader(folder, "val") as a, build_loader(shards, "val") as b:
        x_folder, y_folder = (torch.cat(t) for t in zip(*a, strict=True))
        x_shards, y_shards = (torch.cat(t) for t in zip(*b, strict=True))
    assert torch.equal(x_shards, x_folder[source_index])
    assert torch.equal(y_shards, y_folder[source_index])


def test_dalis_webdataset_reader_reads_the_packed_shards(packed: Path) -> None:
    from nvidia.dali import fn, pipeline_def

    names, labels, _, layout = open_split(packed, "train")
    idx = [str(Path(t).with_suffix(".idx")) for t in layout.tars]

    @pipeline_def(batch_size=N, num_threads=1, device_id=None)
    def read() -> Any:
        outputs = fn.readers.webdataset(
            paths=list(layout.tars), index_paths=idx, ext=["jpg;png;webp", "cls"]
        )
        return tuple(outputs)  # type: ignore[arg-type]

    pipe = read()
    pipe.build()
    images, classes = pipe.run()
    for k in range(N):
        source = f"s{int(names[k].rsplit(':s', 1)[1].split('.')[0]):09d}"
        assert int(bytes(classes.at(k)).decode()) == labels[k], source
        tar, member = names[k].rsplit(":", 1)
        start, size = int(layout.offset[k]), int(layout.size[k])
        with open(tar, "rb") as f:
            f.seek(start)
            assert bytes(images.at(k)) == f.read(size), member


def test_packing_twice_gives_byte_identical_shards(identity_tree: Path, tmp_path: Path) -> None:
    pack(identity_tree, tmp_path / "a", "pack.shard_size_mb=0.004")
    pack(identity_tree, tmp_path / "b", "pack.shard_size_mb=0.004")
    assert tars(tmp_path / "a") == tars(tmp_path / "b")


def test_an_interrupted_pack_is_refused_by_readers_and_resumed_by_rerunning(
    identity_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dali_pipes.tools import pack as pack_module

    reference = tmp_path / "reference"
    pack(identity_tree, reference, "pack.shard_size_mb=0.004")
    out = tmp_path / "out"
    real = pack_module.write_shard
    written: list[int] = []

    def dies_after_two(
        storage: Any, directory: str, number: int, samples: Any, notes: Any = None
    ) -> int:
        if len(written) == 2:  # killed while writing the third shard
            (Path(directory) / f"shard-{number:06d}.tar.partial").write_bytes(b"half a shard")
            raise KeyboardInterrupt
        written.append(number)
        return real(storage, directory, number, samples, notes)

    monkeypatch.setattr(pack_module, "write_shard", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        pack(identity_tree, out, "pack.shard_size_mb=0.004")
    monkeypatch.undo()
    with pytest.raises(DataError, match="incomplete pack"):
        compose_and_build(out)
    # A shard that looks complete but was cut short is found and rewritten, too.
    first = out / "all" / "shard-000000.tar"
    first.write_bytes(first.read_bytes()[:-700])
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    assert tars(out) == tars(reference)
    with compose_and_build(out) as loader:
        assert sum(len(y) for _, y in loader) == N


def compose_and_build(out: Path) -> Any:
    cfg = compose_config(["data=shards", f"data.root={out}", "backend=torch", "backend.device=cpu"])
    return build_loader(cfg, "train")


@pytest.mark.slow
def test_a_pack_killed_with_sigkill_resumes_to_the_same_shards(
    photos: Path, tmp_path: Path
) -> None:
    command = ["-m", "dali_pipes.pack", "data=folder", f"data.root={photos}"]
    command.append("pack.shard_size_mb=0.3")

    def pack_cli(out: Path) -> subprocess.CompletedProcess[str]:
        run = [python(), *command, f"out={out}"]
        return subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=600)

    clean = pack_cli(tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr[-2000:]
    out = tmp_path / "killed"
    proc = subprocess.Popen(  # a real interpreter: it is the process kill -9 ends
        [sys.executable, *command, f"out={out}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while len(list(out.glob("all/*.json"))) < 3 and time.time() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "dataset.json").exists(), "killed before it finished"
    resumed = pack_cli(out)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed:" in resumed.stderr
    assert tars(out) == tars(tmp_path / "clean")


def test_a_changed_dataset_is_not_resumed_without_overwrite(
    identity_tree: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    with pytest.raises(ConfigError, match=r"pack\.overwrite=true"):
        pack(identity_tree, out, "pack.shard_size_mb=0.008")
    pack(identity_tree, out, "pack.shard_size_mb=0.008", "pack.overwrite=true")
    assert len(tars(out)) < 6


def test_pack_refuses_a_directory_it_did_not_write(identity_tree: Path, tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not empty"):
        pack(identity_tree, tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_reading_a_folder_that_is_not_a_pack_says_how_to_pack_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"python -m dali_pipes\.pack"):
        compose_and_build(tmp_path / "nothing")


@pytest.mark.parametrize("kind", BACKENDS)
def test_the_sample_set_packs_into_train_and_val_and_reads_back_like_the_folder(
    kind: str, tmp_path: Path
) -> None:
    small = ["data.train_per_class=10", "data.val_per_class=4"]
    run_pack(compose_config(["data=sample", *small, f"out={tmp_path}"], config_name="pack"))
    assert {p.name for p in tmp_path.iterdir() if p.is_dir()} == {"train", "val"}
    backend, _, _ = kind.partition("-")
    common = [f"backend={backend}", "backend.device=cpu", "data.batch_size=8"]
    folder = compose_config(["data=sample", *small, *common])
    shards = compose_config(["data=shards", f"data.root={tmp_path}", *common])
    for split in ("train", "val"):
        with build_loader(folder, split) as a, build_loader(shards, split) as b:
            assert a.classes == b.classes
            labels_a = sorted(int(v) for _, y in a for v in y)
            labels_b = sorted(int(v) for _, y in b for v in y)
        assert labels_a == labels_b and len(labels_a) == 6 * (10 if split == "train" else 4)


def test_a_shard_read_that_never_returns_is_a_bad_batch_named_with_the_deadline(
    packed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from dali_pipes.data import shard_reader
    from dali_pipes.data.sources import ShardSource, open_source
    from dali_pipes.data.specs import ShardData

    release = threading.Event()
    monkeypatch.setattr(shard_reader.ShardReader, "read", lambda self, indices: release.wait(60))
    source = open_source(ShardData(name="shards", root=str(packed), read_timeout=0.3), "train")
    assert isinstance(source, ShardSource)
    try:
        start = time.monotonic()
        blobs = source.read([0, 1, 2])
        assert time.monotonic() - start < 5
        assert len(blobs) == 3 and all(isinstance(b, DataError) for b in blobs)
        assert "read_timeout=0.3 s" in str(blobs[0]) and ".tar:" in str(blobs[0])
    finally:
        release.set()


def test_a_plan_that_cannot_be_read_now_stops_pack_and_keeps_the_finished_pack(
    identity_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``pack.overwrite=true`` an unreadable plan must not pass for another pack's:
    that would delete the pack already there."""
    from dali_pipes.data.storage import LocalStorage

    out = tmp_path / "out"
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    before = tars(out)
    real = LocalStorage.read_many

    def plan_stalls(self: LocalStorage, paths: Any, timeout: float | None) -> list[Any]:
        if any(p.endswith(PLAN) for p in paths):
            return [DataError(f"{paths[0]}: the read did not finish within 60 s")]
        return real(self, paths, timeout)

    monkeypatch.setattr(LocalStorage, "read_many", plan_stalls)
    with pytest.raises(ConfigError) as info:
        pack(identity_tree, out, "pack.shard_size_mb=0.004", "pack.overwrite=true")
    assert PLAN in str(info.value) and "\n" not in str(info.value)
    assert tars(out) == before and (out / MANIFEST).exists()
