"""``data=mix`` in a training job: two datasets mixed 3:1 on 2 CPU processes under
torchrun, SIGTERMed mid-epoch and resumed, end as the run never interrupted."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch
from helpers.runs import rows, signal_mid_epoch, torchrun, torchrun_command

from dali_pipes.data.sample_set import ensure_sample_dataset
from dali_pipes.train import checkpoints as checkpoint


def mixed(small: Path) -> list[str]:
    """The sample data (720 images) weight 3 and a smaller copy of its classes (60 images)
    weight 1, classes matched by name: 585 and 195 images an epoch (the first read a
    part of each epoch, the second 3.25 times over)."""
    sources = (
        "[{name: sample, train_per_class: 120, val_per_class: 6, weight: 3}, "
        f"{{name: sample, root: '{small}', train_per_class: 10, val_per_class: 2, "
        "weight: 1, tag: small}]"
    )
    return [
        "-m",
        "dali_pipes.train",
        "data=mix",
        f"data.sources={sources}",
        "data.labels=shared",
        "data.batch_size=16",
        "augment=small",
        "model=small_cnn",
        "trainer=quick",
        "trainer.epochs=2",
        "backend.num_threads=1",
    ]


@pytest.mark.slow
def test_a_mix_preempted_on_2_ranks_resumes_to_the_uninterrupted_weights_and_losses(
    tmp_path: Path,
) -> None:
    small = tmp_path / "small"
    ensure_sample_dataset(small, 10, 2)  # made before the ranks start, as a user's data is
    args = mixed(small)
    ref = torchrun(2, *args, f"output_dir={tmp_path / 'ref'}")
    assert "data=mix (585 of " in ref.stderr and " + 195 of small per epoch)" in ref.stderr

    out = tmp_path / "run"
    command = torchrun_command(2, *args, f"output_dir={out}")
    code, stderr = signal_mid_epoch(command, out, signal.SIGTERM, settle=1.0)
    assert code != 0 and "interrupted by SIGTERM" in stderr, stderr[-3000:]
    assert any("interrupted_at_batch" in p.name for p in (out / "checkpoints").iterdir())

    torchrun(2, *args, f"output_dir={out}", "resume=auto")
    final = checkpoint.load(out / "checkpoints" / "epoch_0001.pt")
    want = checkpoint.load(tmp_path / "ref" / "checkpoints" / "epoch_0001.pt")
    for name, tensor in want["model"].items():
        assert torch.equal(final["model"][name], tensor), name
    got, exp = rows(out), rows(tmp_path / "ref")
    assert [r["epoch"] for r in got] == ["0", "1"]
    for key in ("train_loss", "train_top1", "val_loss", "val_top1", "samples", "lr"):
        assert [float(r[key]) for r in got] == pytest.approx(
            [float(r[key]) for r in exp], rel=1e-9
        ), key
    assert [int(r["samples"]) for r in got] == [780, 780]
