"""What users and their files rely on survives the package's layout by layer: every name
``from dali_pipes import ...`` gave, ``python -m dali_pipes.<tool>`` for every tool, every
Hydra group, option and key, and a checkpoint, a pack, a loader state and a config written
before the move (``tests/data/legacy``, written at f246619)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TESTS
from helpers.warm import python
from omegaconf import DictConfig, OmegaConf

import dali_pipes
from dali_pipes import build_loader, compose_config
from dali_pipes.config.compose import config_dir
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.train.models import build_model
from dali_pipes.train.run import train
from dali_pipes.train.state import trainer_spec

LEGACY = TESTS / "data" / "legacy"
SURFACE = json.loads((LEGACY / "surface.json").read_text())
TOOLS = ("train", "bench", "doctor", "scan", "pack", "selfcheck")


def keys(node: Any, prefix: str = "") -> list[str]:
    """Every key of a config node, dotted; the op lists (``ops``, ``batch``) as leaves."""
    out = []
    for key, value in node.items():
        if OmegaConf.is_dict(value) and key not in ("ops", "batch"):
            out += keys(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def test_every_name_dali_pipes_exported_still_imports() -> None:
    assert set(SURFACE["names"]) <= set(dali_pipes.__all__)
    for name in SURFACE["names"]:
        assert getattr(dali_pipes, name) is not None, name


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_still_runs_as_python_m(tool: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [python(), "-m", f"dali_pipes.{tool}", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout.lower() or "== Config ==" in done.stdout, done.stdout[:500]


def test_every_hydra_group_option_and_key_is_still_there() -> None:
    options = {
        f"{group}={path.stem}"
        for group in ("data", "augment", "backend", "model", "trainer")
        for path in (config_dir() / group).glob("*.yaml")
    }
    assert set(SURFACE["groups"]) <= options
    base = ["data=folder", f"data.root={LEGACY / 'folder'}"]
    for option, before in SURFACE["groups"].items():
        group = option.split("=")[0]
        rooted = option in ("data=folder", "data=imagenet", "data=shards")
        over = ([option, base[1]] if rooted else [option]) if group == "data" else [*base, option]
        cfg = compose_config(over)
        missing = set(before) - set(keys(cfg[group], f"{group}."))
        assert not missing, f"{option} lost {sorted(missing)}"
    for root, before in SURFACE["roots"].items():
        extra = ["out=/tmp/x"] if root == "pack" else []
        cfg = compose_config([*base, *extra], config_name=root)
        assert set(before) <= set(cfg.keys()), root


def test_a_saved_config_with_the_old_target_paths_still_builds() -> None:
    saved = OmegaConf.load(LEGACY / "run" / "config.yaml")
    assert isinstance(saved, DictConfig)
    assert saved.trainer.schedule._target_ == "dali_pipes.recipe.warmup_cosine"
    assert saved.model.arch._target_ == "dali_pipes.models.SmallCNN"
    spec = trainer_spec(OmegaConf.merge(OmegaConf.structured(TrainerSpec), saved.trainer))
    model = build_model(saved, num_classes=3)
    assert spec.schedule["_target_"] == "dali_pipes.recipe.warmup_cosine"
    assert sum(p.numel() for p in model.parameters()) > 0


def run_config(out: Path, *extra: str) -> Any:
    return compose_config(
        [
            "data=folder",
            f"data.root={LEGACY / 'folder'}",
            "data.batch_size=4",
            "backend=dali",
            "backend.device=cpu",
            "augment=small",
            "model=small_cnn",
            "model.arch.width=4",
            "trainer=quick",
            f"output_dir={out}",
            "seed=5",
            *extra,
        ]
    )


@pytest.mark.slow
def test_a_checkpoint_written_before_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(LEGACY / "run", out)
    row = train(run_config(out, "trainer.epochs=2", "resume=auto"))
    assert row["epoch"] == 1
    lines = (out / "metrics.csv").read_text().strip().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["0", "1"]  # epoch 0 kept, 1 added
    state = torch.load(out / "checkpoints" / "epoch_0001.pt", weights_only=True)
    assert state["loader"]["epoch"] == 2


@pytest.mark.parametrize("backend", ["torch", "dali"])
def test_a_pack_written_before_reads_as_before(backend: str, tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shutil.copytree(LEGACY / "shards", shards)
    common = ["data.batch_size=4", f"backend={backend}", "backend.device=cpu", "augment=small"]
    packed = build_loader(compose_config(["data=shards", f"data.root={shards}", *common]), "val")
    folder = compose_config(["data=folder", f"data.root={LEGACY / 'folder'}", *common])
    with packed, build_loader(folder, "val") as plain:
        a = torch.cat([labels for _, labels in packed])
        b = torch.cat([labels for _, labels in plain])
    # pack stores the samples in its own order; the same 12, the same labels
    assert torch.equal(a.sort().values, b.sort().values) and len(a) == 12


def test_a_loader_state_written_before_continues_its_epoch() -> None:
    state = json.loads((LEGACY / "loader_state.json").read_text())
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={LEGACY / 'folder'}",
            "data.batch_size=4",
            "backend=dali",
            "backend.device=cpu",
            "augment=small",
            "seed=5",
        ]
    )
    with build_loader(cfg, "train") as resumed, build_loader(cfg, "train") as straight:
        resumed.load_state_dict(state)
        rest = [labels for _, labels in resumed]
        straight.set_epoch(2)
        whole = [labels for _, labels in straight]
    assert state["epoch"] == 2 and state["samples_seen"] == 4
    assert len(rest) == len(whole) - 1
    assert all(torch.equal(a, b) for a, b in zip(rest, whole[1:], strict=True))
