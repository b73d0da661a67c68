"""A full disk, a read-only folder or a kill during a write: the previous state stays whole
and readable, the next run cleans up and goes on, and the error is one line."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, TESTS
from helpers.disks import fill, tmpfs
from helpers.errors import one_line
from helpers.shards import pack
from helpers.warm import python

from dali_pipes import compose_config
from dali_pipes.data.files import WriteError
from dali_pipes.errors import DaliPipesError
from dali_pipes.train import checkpoints
from dali_pipes.train.run import train

RUN = [
    "backend=synthetic",
    "data=synthetic",
    "data.num_samples=16",
    "data.num_classes=4",
    "data.batch_size=8",
    "augment=small",
    "model=small_cnn",
    "trainer=quick",
    "trainer.epochs=3",
]


def epochs_in_metrics(out: Path) -> list[int]:
    with (out / "metrics.csv").open() as f:
        return [int(row["epoch"]) for row in csv.DictReader(f)]


def run_train(*overrides: str, probe: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(TESTS / "probes" / probe)] if probe else ["-m", "dali_pipes.train"]
    return subprocess.run(
        [python(), *command, *overrides],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_full_disk_during_a_checkpoint_keeps_the_last_one_and_resume_repeats_no_metrics_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tmpfs(tmp_path / "disk", 32768) as disk:
        out = disk / "run"
        save = checkpoints.save_atomic

        def full_at_epoch_1(state: dict[str, Any], path: Path) -> None:
            if "epoch_0001" in path.name:
                fill(disk, leave=8192)
            save(state, path)

        monkeypatch.setattr(checkpoints, "save_atomic", full_at_epoch_1)
        with pytest.raises(DaliPipesError) as exc:
            train(compose_config([*RUN, f"output_dir={out}"]))
        message = one_line(exc)
        assert str(out / "checkpoints" / "epoch_0001.pt") in message
        assert "No space left on device" in message and "needed" in message
        assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch_0000.pt"]
        assert torch.load(out / "checkpoints" / "epoch_0000.pt", weights_only=True)["metrics"]
        assert epochs_in_metrics(out) == [0, 1]  # epoch 1's row came before its checkpoint
        monkeypatch.undo()
        (disk / "filler.bin").unlink()
        train(compose_config([*RUN, f"output_dir={out}", "resume=auto"]))
        assert epochs_in_metrics(out) == [0, 1, 2], "epoch 1 redone, its row written once"
        mode = (out / "checkpoints" / "epoch_0002.pt").stat().st_mode & 0o777
        assert mode == 0o666 & ~current_umask(), "checkpoints as readable as other outputs"


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_write_leaves_the_previous_one_and_resume_cleans_up(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    killed = run_train(*RUN, f"output_dir={out}", probe="killed_save_probe.py")
    assert killed.returncode == -9, killed.stderr[-2000:]
    left = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert len(left) == 2 and left[1] == "epoch_0000.pt", left
    assert left[0].startswith(".epoch_0001.pt.") and left[0].endswith(".tmp"), "killed mid-write"
    resumed = run_train(*RUN, f"output_dir={out}", "resume=auto")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "left by a run killed while writing it" in resumed.stderr
    assert not list((out / "checkpoints").glob(".*")), "no temporary file survives"
    assert epochs_in_metrics(out) == [0, 1, 2]


def test_a_disk_full_at_start_is_one_line_and_the_earlier_config_stays(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", 512) as disk:
        out = disk / "run"
        out.mkdir()
        (out / "config.yaml").write_text("seed: 0\n")
        fill(disk)
        done = run_train(*RUN, f"output_dir={out}")
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert str(out) in done.stderr and "No space left on device" in done.stderr
        assert (out / "config.yaml").read_text() == "seed: 0\n"


@pytest.mark.slow
def test_resuming_another_models_checkpoint_says_what_differs_and_how_to_continue(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"  # a run of another model, trained in this process
    train(compose_config([*RUN, "trainer.epochs=1", f"output_dir={out}", "model=resnet18"]))
    again = run_train(*RUN, f"output_dir={out}", "resume=auto")
    assert again.returncode == 2
    line = again.stderr.strip().splitlines()[-1]
    assert "Traceback" not in again.stderr
    assert "model.name=resnet18 there, small_cnn here" in line
    assert f"python -m dali_pipes.train model.name=resnet18 output_dir={out} resume=auto" in line
    assert line.removeprefix("dali_pipes: ") in (out / "train.log").read_text()


@pytest.mark.slow
def test_a_damaged_checkpoint_suggests_what_works(tmp_path: Path) -> None:
    out = tmp_path / "run"  # trained in this process; the resumes are the command line's
    train(compose_config([*RUN, "trainer.epochs=2", f"output_dir={out}"]))
    newest = out / "checkpoints" / "epoch_0001.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    again = run_train(*RUN, f"output_dir={out}", "resume=auto")
    assert again.returncode == 2
    assert f"delete it (rm {newest})" in again.stderr and "resume=null" not in again.stderr
    newest.unlink()
    resumed = run_train(*RUN, f"output_dir={out}", "resume=auto")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert epochs_in_metrics(out) == [0, 1, 2]


def test_pack_onto_a_full_disk_is_one_line_and_leaves_no_partial_shard(
    real_photos: Path, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "disk", 384) as disk:
        with pytest.raises(WriteError) as exc:
            pack(real_photos, disk / "out", "pack.shard_size_mb=0.2")
        message = one_line(exc)
        assert "No space left on device" in message and "needed" in message
        assert "rerunning the same command resumes" in message
        leftovers = [p.name for p in disk.rglob("*") if p.name.endswith((".tmp", ".partial"))]
        assert leftovers == []


def test_pack_into_a_read_only_folder_is_one_line(identity_tree: Path, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", 64, read_only=True) as ro, pytest.raises(WriteError) as exc:
        pack(identity_tree, ro / "out")
    assert str(ro / "out") in one_line(exc) and "Read-only file system" in one_line(exc)


def test_a_shard_corrupted_in_place_is_found_by_its_checksum_and_rewritten(
    identity_tree: Path, tmp_path: Path
) -> None:
    reference, out = tmp_path / "reference", tmp_path / "out"
    pack(identity_tree, reference, "pack.shard_size_mb=0.004")
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    shard = out / "all" / "shard-000001.tar"
    data = bytearray(shard.read_bytes())
    data[1000] ^= 0xFF  # same size, other bytes
    shard.write_bytes(bytes(data))
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    assert shard.read_bytes() == (reference / "all" / "shard-000001.tar").read_bytes()
