"""Preemption: SIGTERM/SIGINT stop every rank after the same step, a consistent checkpoint
is written, and resuming gives exactly the run that was never interrupted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, TESTS
from helpers.runs import PREEMPTIBLE, rows, torchrun, torchrun_command
from helpers.shared import PreemptedRun, own_copy
from helpers.warm import python

from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.preemption import Interrupted, Preempted, StopRequest
from dali_pipes.train import checkpoints as checkpoint

ROOT = REPO


def test_a_signal_is_only_recorded_and_the_stop_comes_at_the_next_poll() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        assert not stop.poll()
        os.kill(os.getpid(), signal.SIGTERM)  # handled here: the process goes on
        assert stop.signum == signal.SIGTERM and stop.name == "SIGTERM"
        assert stop.poll() and stop.settle()
    assert signal.getsignal(signal.SIGTERM) is before, "the previous handler is back"


def test_a_second_signal_stops_at_once() -> None:
    with StopRequest(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)


def test_two_sigterms_are_a_second_signal_with_its_own_exit_code() -> None:
    with StopRequest(), pytest.raises(Interrupted) as second:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
    assert second.value.exit_code == 143
    assert isinstance(second.value, KeyboardInterrupt)


def test_preempted_exits_with_128_plus_the_signal() -> None:
    assert Preempted(signal.SIGTERM, "x").exit_code == 143
    assert Preempted(signal.SIGINT, "x").exit_code == 130


@pytest.mark.slow
def test_ranks_agree_on_the_step_to_stop_after_when_one_rank_is_signalled(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        torchrun_command(2, str(TESTS / "probes" / "stop_probe.py"), str(tmp_path)),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["stopped_after"] == ranks[1]["stopped_after"] is not None
    assert 3 <= ranks[0]["stopped_after"] <= 4, "within one step of the signal"
    assert ranks[0]["signum"] is None and ranks[1]["signum"] == signal.SIGTERM


def test_a_checkpoint_holding_arbitrary_objects_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "epoch_0000.pt"
    torch.save({"model": {}, "evil": Path("/")}, path)  # not a tensor nor a plain value
    with pytest.raises(DaliPipesError, match="objects other than tensors") as err:
        checkpoint.load(path)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_sigterm_under_torchrun_then_resume_gives_the_uninterrupted_weights_and_losses(
    torchrun_reference: Path, preempted_on_2_ranks: PreemptedRun, tmp_path: Path
) -> None:
    """The preempted run (made once, shared with the next test) resumed on 2 ranks ends
    with the weights and every epoch's figures of the same run never interrupted."""
    ref, preempted = torchrun_reference, preempted_on_2_ranks
    assert preempted.returncode != 0, "a preempted run does not report success"
    assert "interrupted by SIGTERM" in preempted.stderr
    out = own_copy(preempted.out, tmp_path / "preempted")
    state = checkpoint.load(out / "checkpoints" / preempted.checkpoint.name)  # weights_only
    assert len(state["rng"]) == 2, "every rank's generators are saved"

    torchrun(2, *PREEMPTIBLE, f"output_dir={out}", "resume=auto")
    final, want = (
        checkpoint.load(out / "checkpoints" / "epoch_0002.pt"),
        checkpoint.load(ref / "checkpoints" / "epoch_0002.pt"),
    )
    for name, tensor in want["model"].items():
        assert torch.equal(final["model"][name], tensor), name
    got, exp = rows(out), rows(ref)
    assert [r["epoch"] for r in got] == ["0", "1", "2"]
    for key in ("train_loss", "train_top1", "val_loss", "val_top1", "samples", "lr"):
        assert [float(r[key]) for r in got] == pytest.approx(
            [float(r[key]) for r in exp], rel=1e-9
        ), key


@pytest.mark.slow
def test_a_run_preempted_on_2_ranks_finishes_its_epoch_on_3_reading_each_sample_once(
    preempted_on_2_ranks: PreemptedRun, tmp_path: Path
) -> None:
    out = own_copy(preempted_on_2_ranks.out, tmp_path / "elastic")
    seen = checkpoint.load(out / "checkpoints" / preempted_on_2_ranks.checkpoint.name)["loader"][
        "samples_seen"
    ]
    assert 0 < seen < 720 and seen % (2 * 16) == 0, "both ranks stopped after the same step"

    done = torchrun(3, *PREEMPTIBLE, f"output_dir={out}", "resume=auto")
    assert "dealt out to the new ranks" in done.stderr
    result = rows(out)
    assert [r["epoch"] for r in result] == ["0", "1", "2"]
    # Epoch 1: the samples read on 2 ranks, then the rest once on 3 ranks plus only
    # DistributedSampler's padding of that rest to a multiple of 3.
    assert int(result[1]["samples"]) == 720 + (-(720 - seen)) % 3
    assert [int(result[0]["samples"]), int(result[2]["samples"])] == [720, 720]


def blocked_run(tree: Path, out: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    """A training run blocked in the read of one file of a copy of ``tree`` (a dead mount:
    the probe makes it a FIFO once listed), once it says so."""
    tree = Path(shutil.copytree(tree, out.with_name(out.name + "-data")))
    stuck = sorted(tree.rglob("*.jpg"))[3]
    proc = subprocess.Popen(
        [
            python(),
            str(TESTS / "probes" / "blocked_read_probe.py"),
            str(stuck),
            "data=folder",
            f"data.root={tree}",
            "data.batch_size=4",
            "data.read_timeout=600",
            "backend.device=cpu",
            "model=small_cnn",
            "trainer=quick",
            "trainer.epochs=1",
            f"output_dir={out}",
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "blocked", proc.communicate(timeout=60)[1][-3000:]
    return proc, stuck


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_sigterm_during_a_read_that_never_returns_ends_the_run_within_the_stop_timeout(
    identity_tree: Path, tmp_path: Path, backend: str
) -> None:
    # The torch backend reads in this process (no workers), where the step boundary waits.
    workers = ["backend.num_workers=0"] if backend == "torch" else []
    proc, _ = blocked_run(
        identity_tree, tmp_path, f"backend={backend}", *workers, "trainer.stop_timeout=3"
    )
    time.sleep(0.5)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - start
    assert proc.returncode == 143, stderr[-3000:]
    assert 2.5 < took < 20, f"{took:.1f} s"
    assert "no step boundary within 3 s" in stderr
    assert "no step boundary within 3 s" in (tmp_path / "train.log").read_text()


def test_a_second_sigterm_during_a_blocked_read_exits_at_once_with_143(
    identity_tree: Path, tmp_path: Path
) -> None:
    proc, _ = blocked_run(identity_tree, tmp_path, "trainer.stop_timeout=60")
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr[-3000:]
    assert time.monotonic() - start < 10
