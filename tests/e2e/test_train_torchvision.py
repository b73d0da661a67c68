"""``python -m dali_pipes.train augment.torchvision.train=...``: a torchvision pipeline
given by ``_target_``s trains like a preset, on any backend, and is saved with the run."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from helpers.warm import python

from dali_pipes import compose_config
from dali_pipes.train.run import train

V2 = "torchvision.transforms.v2"
FLOAT = "{_target_: hydra.utils.get_object, path: torch.float32}"
NORMALIZE = f"{{_target_: {V2}.Normalize, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}}"
TRAIN = (
    f"augment.torchvision.train={{_target_: {V2}.Compose, transforms: ["
    f"{{_target_: {V2}.RandomResizedCrop, size: 48, scale: [0.35, 1.0]}}, "
    f"{{_target_: {V2}.RandomHorizontalFlip}}, "
    f"{{_target_: {V2}.RandomApply, p: 0.5, transforms: [{{_target_: {V2}.ColorJitter, "
    f"brightness: 0.3}}]}}, {{_target_: {V2}.PILToTensor}}, "
    f"{{_target_: {V2}.ToDtype, dtype: {FLOAT}, scale: true}}, {NORMALIZE}, "
    f"{{_target_: {V2}.RandomErasing, p: 0.25}}]}}"
)
VAL = (
    f"augment.torchvision.val={{_target_: {V2}.Compose, transforms: ["
    f"{{_target_: {V2}.Resize, size: 56}}, {{_target_: {V2}.CenterCrop, size: 48}}, "
    f"{{_target_: {V2}.PILToTensor}}, {{_target_: {V2}.ToDtype, dtype: {FLOAT}, scale: true}}, "
    f"{NORMALIZE}]}}"
)
TINY = ["data.train_per_class=24", "data.val_per_class=6", "data.batch_size=8", "trainer.epochs=1"]


@pytest.mark.slow
def test_the_train_entry_point_trains_on_a_torchvision_pipeline(tmp_path: Path) -> None:
    done = subprocess.run(
        [python(), "-m", "dali_pipes.train", TRAIN, VAL, *TINY, f"output_dir={tmp_path}"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    saved = (tmp_path / "config.yaml").read_text()
    assert f"{V2}.RandomResizedCrop" in saved and "RandomErasing" in saved


@pytest.mark.slow
def test_the_loop_runs_a_torchvision_pipeline_on_the_torch_backend(tmp_path: Path) -> None:
    overrides = [TRAIN, VAL, *TINY, "backend=torch", "backend.num_workers=0"]
    row = train(compose_config([*overrides, f"output_dir={tmp_path}"]))
    assert row["samples"] == 6 * 24 and math.isfinite(row["train_loss"])


@pytest.mark.slow
def test_a_transform_that_cannot_be_mapped_is_one_line_with_exit_code_2(tmp_path: Path) -> None:
    lam = f"augment.torchvision.train={{_target_: {V2}.Compose, transforms: [{{_target_: {V2}.CenterCrop, size: 8}}, {{_target_: {V2}.GaussianNoise}}]}}"  # noqa: E501
    done = subprocess.run(
        [python(), "-m", "dali_pipes.train", lam, f"output_dir={tmp_path}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "augment.torchvision.train: torchvision transform [1]" in last
    assert "GaussianNoise is not supported" in last
