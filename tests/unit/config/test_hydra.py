"""Hydra from the outside: our groups in a user's app, multirun, Hydra's errors in one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.warm import python
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from dali_pipes.config.compose import config_dir
from dali_pipes.config.specs import to_spec
from dali_pipes.data.specs import DataSpec, FolderData

# A user's own primary config: it owns no data group, it finds ours on the search path.
APP_CONFIG = """\
defaults:
  - data: folder
  - _self_

hydra:
  searchpath:
    - pkg://dali_pipes.conf
  run:
    dir: .
  output_subdir: null
"""

APP = """\
import json

import hydra
from omegaconf import OmegaConf

import dali_pipes  # registers our config schemas
from dali_pipes.config.specs import to_spec
from dali_pipes.data.specs import DataSpec


@hydra.main(config_path=".", config_name="app", version_base="1.3")
def main(cfg):
    data = to_spec(cfg.data, DataSpec)
    print(json.dumps({"node": OmegaConf.to_container(cfg.data), "spec": type(data).__name__}))


main()
"""

# The smallest training the sample data allows: 24 images per class, 2 steps, 6 val images.
TINY = [
    "data.train_per_class=24",
    "data.val_per_class=1",
    "data.batch_size=8",
    "backend.num_threads=1",
    "trainer.epochs=1",
    "trainer.max_steps_per_epoch=2",
]


def run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python(), *args],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_packaged_config_groups_are_the_ones_in_conf() -> None:
    """``pkg://dali_pipes.conf`` reads ``conf/`` (the editable install maps the package
    there; a wheel carries it as dali_pipes/conf)."""
    from importlib.resources import files

    packaged = files("dali_pipes.conf") / "data" / "folder.yaml"
    assert packaged.is_file()
    assert packaged.read_text() == (config_dir() / "data" / "folder.yaml").read_text()


def test_a_users_hydra_app_composes_our_data_group_after_import_dali_pipes(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.yaml").write_text(APP_CONFIG)
    (tmp_path / "app.py").write_text(APP)
    done = run(["app.py", "data.root=/photos", "data.batch_size=32"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["spec"] == "FolderData"
    assert out["node"]["name"] == "folder" and out["node"]["root"] == "/photos"
    assert out["node"]["batch_size"] == 32 and out["node"]["on_error"] == "raise"


def test_the_schema_checks_a_users_composition(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(APP_CONFIG)
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        cfg = compose("app", overrides=["data.root=/photos"])
        with pytest.raises(ConfigCompositionException, match="rooot"):
            compose("app", overrides=["data.rooot=/photos"])
        with pytest.raises(ConfigCompositionException, match="batch_size"):
            compose("app", overrides=["data.root=/photos", "data.batch_size=many"])
    data = to_spec(cfg.data, DataSpec)
    assert isinstance(data, FolderData) and data.root == "/photos"
    assert OmegaConf.get_type(cfg.data) is FolderData


@pytest.mark.slow
def test_multirun_runs_every_job_in_its_own_output_dir(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run(
        ["-m", "dali_pipes.train", "-m", "seed=0,1", *TINY, f"output_dir={out}"], cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for job, seed in ((0, 0), (1, 1)):
        job_dir = out / str(job)
        saved = OmegaConf.load(job_dir / "config.yaml")
        assert saved.seed == seed and Path(saved.output_dir) == job_dir
        metrics = (job_dir / "metrics.csv").read_text().splitlines()
        assert len(metrics) == 2, metrics  # the header and the one epoch
        assert (job_dir / "checkpoints" / "epoch_0000.pt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing else written


def test_an_unknown_option_from_the_command_line_is_one_line_with_the_choices(
    tmp_path: Path,
) -> None:
    done = run(["-m", "dali_pipes.train", "model=nonexistent"], cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    (line,) = lines
    assert line.startswith("dali_pipes: error: ") and "model" in line and "nonexistent" in line
    assert "resnet18, resnet50, retinanet_resnet50_fpn_v2, small_cnn" in line  # sorted
    assert not list(tmp_path.iterdir())
