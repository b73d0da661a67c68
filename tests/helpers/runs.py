"""Training runs as the end-to-end tests start them: ``python -m dali_pipes.train`` and
torchrun jobs in subprocesses, a run's metrics, and a torchrun job preempted mid-epoch."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import time
from pathlib import Path

from dali_pipes.train.checkpoints import latest
from helpers.warm import python

REPO = Path(__file__).resolve().parents[2]
#: Unbuffered, so that what a run printed before it was killed is in its stderr.
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}

#: A torchrun job long enough to be signalled mid-epoch: 720 images, 2 ranks of batch 16
#: (23 steps an epoch), 3 epochs.
PREEMPTIBLE = [
    "-m",
    "dali_pipes.train",
    "trainer.epochs=3",
    "data.train_per_class=120",
    "data.val_per_class=6",
    "data.batch_size=16",
    "backend.num_threads=1",
]


def rows(out: Path) -> list[dict[str, str]]:
    """A run's ``metrics.csv``, one dict per epoch."""
    with (out / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def torchrun_command(nproc: int, *args: str) -> list[str]:
    """``torchrun --standalone --nproc_per_node=nproc ARGS``, where ARGS is ``-m MODULE
    ...`` or ``SCRIPT ...``: the launcher and each rank are started with the tests' warm
    interpreter (helpers/warm.py), the ranks instead of torchrun's ``python -u``."""
    launcher = [python(), "-m", "torch.distributed.run", "--standalone"]
    return [*launcher, f"--nproc_per_node={nproc}", "--no-python", python(), *args]


def run_cli(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m dali_pipes.train ARGS`` from the repository root, output captured."""
    return subprocess.run(
        [python(), "-m", "dali_pipes.train", *args],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


def torchrun(nproc: int, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``torchrun --standalone --nproc_per_node=nproc ARGS``, which must succeed."""
    done = subprocess.run(
        torchrun_command(nproc, *args),
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def signal_mid_epoch(command: list[str], out: Path, sig: int, settle: float) -> tuple[int, str]:
    """Start ``command`` (a training run writing to ``out``), wait for its first checkpoint
    and ``settle`` seconds more (into epoch 1), then send it ``sig``: its exit code and
    stderr once it has stopped."""
    proc = subprocess.Popen(
        command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 300
    while latest(out / "checkpoints") is None and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(settle)
    assert proc.poll() is None, "the run ended before it could be signalled"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr


def preempt_in_epoch_1(nproc: int, out: Path) -> tuple[Path, int, str]:
    """Start :data:`PREEMPTIBLE` under torchrun and SIGTERM it inside epoch 1 (as SLURM
    does; torchrun passes it on to every rank): the mid-epoch checkpoint, the exit code
    and stderr."""
    command = torchrun_command(nproc, *PREEMPTIBLE, f"output_dir={out}")
    returncode, stderr = signal_mid_epoch(command, out, signal.SIGTERM, settle=1.0)
    stopped = latest(out / "checkpoints")
    assert stopped is not None and "interrupted_at_batch" in stopped.name, stderr[-3000:]
    return stopped, returncode, stderr
