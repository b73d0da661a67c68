"""The peers ``bench`` measures beside dali_pipes: SPDL, DALI's dynamic mode and FFCV.

Each peer, on the identity tree (every image a flat colour naming its sample), yields the
contract's batches (normalised float32 ``[N, 3, S, S]``, int64 ``[N]`` labels), every
sample exactly once per epoch with its own label, the same samples per epoch as the
others, a partial last batch unless ``drop_last``; resize + centre crop for evaluation.
A peer that cannot run here is one line in its bench row, never a failure. No test
asserts a speed. The peers are the optional extra ``peers``, which ``make test``
installs; without a package, its tests skip and say why.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import gpu
from helpers.identity import MEAN, RESIZE, SIZE, STD, N, ids

from dali_pipes import compose_config
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.config.specs import loader_spec
from dali_pipes.errors import DaliPipesError
from dali_pipes.tools.bench import run_bench
from dali_pipes.tools.peers.task import INSTALL, PeerTask, PeerUnavailable

BATCH = 4
PEERS = ("spdl", "dali-dynamic", "ffcv")


def _spec(root: Path, *overrides: str) -> LoaderSpec:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={root}",
            f"augment.train.crop.size={SIZE}",
            f"augment.val.crop.size={SIZE}",
            f"augment.val.crop.resize={RESIZE}",
            f"data.batch_size={BATCH}",
            *overrides,
        ]
    )
    return loader_spec(cfg, "train", rank=0, world_size=1)


def _open(peer: str, task: PeerTask, folder: Path, device: str = "cpu") -> Any:
    """The peer's loader, or a skip naming what is missing."""
    try:
        if peer == "spdl":
            from dali_pipes.tools.peers.spdl_loader import SpdlLoader

            return SpdlLoader(task)
        if peer == "dali-dynamic":
            from dali_pipes.tools.peers.dali_dynamic import DynamicLoader

            return DynamicLoader(task, device)
        from dali_pipes.tools.peers.ffcv_loader import FfcvLoader, beton_path, write_beton

        path = beton_path(task, str(folder))
        if not path.exists():
            write_beton(task, path)
        return FfcvLoader(task, path)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))


def _epoch(loader: Any, task: PeerTask, device: str = "cpu") -> list[int]:
    """One epoch's samples, in order, after checking every batch against the contract
    and each image against its label."""
    lo = min((0 - m) / s for m, s in zip(MEAN, STD, strict=True))
    hi = max((1 - m) / s for m, s in zip(MEAN, STD, strict=True))
    seen: list[int] = []
    batches = 0
    for images, labels in loader:
        n = len(labels)
        assert images.shape == (n, 3, SIZE, SIZE) and images.dtype == torch.float32
        assert images.is_contiguous() and images.device.type == device
        assert labels.shape == (n,) and labels.dtype == torch.int64
        assert labels.device.type == device
        assert lo - 1e-4 <= images.min().item() and images.max().item() <= hi + 1e-4
        samples = ids(images)
        assert labels.tolist() == [task.labels[k] for k in samples], "image and label paired"
        seen += samples
        batches += 1
    assert batches == len(loader)
    return seen


@pytest.mark.parametrize("peer", PEERS)
def test_each_peer_yields_contract_batches_and_every_sample_once_per_epoch(
    peer: str, identity_tree: Path, tmp_path: Path
) -> None:
    task = PeerTask.from_spec(_spec(identity_tree), threads=2, peer=peer)
    assert len(task.files) == N
    with _open(peer, task, tmp_path) as loader:
        assert len(loader) == math.ceil(N / BATCH)
        orders = [_epoch(loader, task) for _ in range(2)]  # every iter() is one epoch
    for order in orders:
        assert sorted(order) == list(range(N)), "each sample once, the partial batch kept"
    assert orders[0] != orders[1], "shuffled anew each epoch"


@pytest.mark.parametrize("peer", PEERS)
def test_each_peer_drops_the_partial_batch_when_asked(
    peer: str, identity_tree: Path, tmp_path: Path
) -> None:
    task = PeerTask.from_spec(_spec(identity_tree, "data.drop_last=true"), threads=1, peer=peer)
    with _open(peer, task, tmp_path) as loader:
        assert len(loader) == N // BATCH
        order = _epoch(loader, task)
    assert len(order) == N // BATCH * BATCH and len(set(order)) == len(order)


@pytest.mark.parametrize("peer", PEERS)
def test_each_peer_resizes_and_centre_crops_the_evaluation_split(
    peer: str, identity_tree: Path, tmp_path: Path
) -> None:
    spec = _spec(identity_tree)
    task = PeerTask.from_spec(replace(spec, train=False), threads=1, peer=peer)
    assert task.flip == 0 and task.crop.name == "resize_center_crop"
    with _open(peer, task, tmp_path) as loader:
        assert sorted(_epoch(loader, task)) == list(range(N))


def test_the_peers_refuse_a_pipeline_they_cannot_realise(identity_tree: Path) -> None:
    spec = _spec(identity_tree, "augment=deit", f"augment.train.crop.size={SIZE}")
    with pytest.raises(DaliPipesError, match="leave spdl out") as caught:
        PeerTask.from_spec(spec, threads=1, peer="spdl")
    assert "\n" not in str(caught.value)


def _bench(
    root: Path, tmp_path: Path, candidates: str, images: int = 17
) -> dict[str, dict[str, Any]]:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={root}",
            f"augment.train.crop.size={SIZE}",
            "data.batch_size=4",
            "backend.num_threads=1",
            "bench.repeats=1",
            "bench.warmup_images=4",
            f"bench.min_images={images}",
            f"bench.candidates=[{candidates}]",
            f"bench.out={tmp_path / 'bench.json'}",
            f"bench.beton={tmp_path / 'beton'}",
        ],
        config_name="bench",
    )
    return {r["name"]: r for r in run_bench(cfg)["results"]}


def test_bench_shows_a_missing_peer_as_one_line_in_its_row(
    identity_tree: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for module in ("spdl.io", "nvidia.dali.experimental.dynamic", "ffcv.loader"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails: as if not installed
    rows = _bench(identity_tree, tmp_path, "dali-cpu,spdl,dali-dynamic,ffcv")
    assert rows["dali-cpu"]["images_per_s_median"] > 0, "the others are still measured"
    for peer in PEERS:
        note = rows[peer]["note"]
        assert note.startswith(f"skipped: {peer}: ") and INSTALL in note and "\n" not in note
        assert rows[peer]["repeats"] == []
    table = capsys.readouterr().out
    assert "| spdl | – |" in table and INSTALL in table


def test_spdl_without_ffmpeg_says_which_make_target_installs_it(
    identity_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    utils = pytest.importorskip("spdl.io.utils", reason=f"spdl is not installed: {INSTALL}")
    from dali_pipes.tools.peers.spdl_loader import SpdlLoader

    def missing() -> None:
        raise RuntimeError("libavutil.so.57: cannot open shared object file")

    monkeypatch.setattr(utils, "get_ffmpeg_versions", missing)
    task = PeerTask.from_spec(_spec(identity_tree), threads=1, peer="spdl")
    with pytest.raises(PeerUnavailable, match="make peer-libs") as caught:
        SpdlLoader(task)
    assert "libavutil" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_bench_rows_give_cpu_seconds_per_thousand_images_and_peak_memory(
    identity_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # enough images for a loader's CPU time to span many of /proc's 10 ms ticks
    peers = "dali-cpu,spdl,dali-dynamic,dali-dynamic-gpu,ffcv"
    rows = _bench(identity_tree, tmp_path, peers, images=4 * 17)
    ours = rows["dali-cpu"]["images_per_s_median"]
    measured = [name for name in ("dali-cpu", *PEERS) if rows[name]["repeats"]]
    assert "dali-cpu" in measured
    for name in measured:
        row = rows[name]
        assert 0 < row["cpu_s_per_1k_images"] < math.inf and row["peak_host_mb"] > 0, name
        assert row["dali_cpu_vs"] == pytest.approx(ours / row["images_per_s_median"])
    if rows["ffcv"]["repeats"]:
        assert "converted in" in rows["ffcv"]["note"], "the conversion is timed apart"
    if not torch.cuda.is_available():
        assert rows["dali-dynamic-gpu"]["note"] == "skipped: no CUDA device"
    assert "CPU s / 1k img" in capsys.readouterr().out


@gpu
def test_dali_dynamic_on_the_gpu_yields_cuda_batches(identity_tree: Path, tmp_path: Path) -> None:
    task = PeerTask.from_spec(_spec(identity_tree), threads=2, peer="dali-dynamic-gpu")
    with _open("dali-dynamic", task, tmp_path, device="gpu") as loader:
        assert sorted(_epoch(loader, task, device="cuda")) == list(range(N))
