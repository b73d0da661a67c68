"""This process's ranks from torchrun's or Slurm's variables, one GPU per process, and the
process group's rendezvous.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import LAUNCH_VARS, REPO, TESTS, gpu
from helpers.launch import slurm
from helpers.warm import python

from dali_pipes.errors import ConfigError
from dali_pipes.runtime.distributed import Ranks, cpu_share, ranks, slurm_tasks_on_node


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------- Slurm


def test_srun_tasks_get_their_ranks_from_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    slurm(monkeypatch, procid=13, ntasks=16, localid=5, SLURM_NTASKS_PER_NODE="8")
    assert ranks() == Ranks(13, 16, 5, 8, "slurm")


@pytest.mark.parametrize(("node", "expected"), [(0, 2), (2, 2), (3, 1)])
def test_the_local_world_comes_from_slurms_compressed_tasks_per_node(
    monkeypatch: pytest.MonkeyPatch, node: int, expected: int
) -> None:
    slurm(
        monkeypatch,
        procid=0,
        ntasks=7,
        localid=0,
        SLURM_TASKS_PER_NODE="2(x3),1",
        SLURM_NODEID=str(node),
    )
    assert ranks().local_world_size == expected


def test_tasks_per_node_lists_are_expanded() -> None:
    assert [slurm_tasks_on_node("2(x3),1", n) for n in range(4)] == [2, 2, 2, 1]
    assert slurm_tasks_on_node("8", 0) == 8
    with pytest.raises(ConfigError, match=r"SLURM_TASKS_PER_NODE='eight' is invalid"):
        slurm_tasks_on_node("eight", 0)


def test_torchrun_variables_win_over_slurms(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchrun started under srun (one task per node) describes its own processes."""
    slurm(monkeypatch, procid=1, ntasks=2, localid=0, SLURM_NTASKS_PER_NODE="1")
    for key, value in {"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert ranks() == Ranks(9, 16, 1, 8, "torchrun")


def test_a_batch_script_outside_an_srun_step_is_a_single_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """sbatch runs the script once, with the allocation's SLURM_NTASKS: believing it was
    one of 8 processes would wait for 7 that never start."""
    slurm(monkeypatch, procid=0, ntasks=8, localid=0, step=False)
    assert ranks() == Ranks()


def test_a_malformed_rank_variable_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    slurm(monkeypatch, procid=0, ntasks=2, localid=0, SLURM_PROCID="first")
    with pytest.raises(ConfigError, match=r"SLURM_PROCID='first' is invalid"):
        ranks()


def test_srun_cpus_per_task_is_the_process_share_of_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cores = len(os.sched_getaffinity(0))
    slurm(monkeypatch, procid=0, ntasks=4, localid=0, SLURM_NTASKS_PER_NODE="4")
    assert cpu_share() == max(1, cores // 4)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert cpu_share() == 1


#: A process of its own that builds a loader and says where its batches are.
PLACEMENT_PROBE = TESTS / "probes" / "placement_probe.py"


def placement(cwd: Path, env: dict[str, str], *overrides: str) -> dict[str, str]:
    """Run the placement probe with ``overrides`` from ``cwd`` with ``env`` (the
    launcher's variables); where it found the model, the loader and the batch."""
    done = subprocess.run(
        [python(), str(PLACEMENT_PROBE), *overrides],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def local_rank_one(
    identity_tree: Path, backend: str, backend_device: str, trainer_device: str
) -> tuple[list[str], dict[str, str]]:
    """LOCAL_RANK=1 of 2 (one GPU each, as ``srun --gpus-per-task=1`` gives them): the
    probe's overrides and environment. PYTHONPATH keeps what it holds outside this tree
    (where the GPU machine's DALI lives), never the tree or its tests."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    paths = [p for p in env.pop("PYTHONPATH", "").split(os.pathsep) if p]
    outside = [
        p for p in paths if REPO.resolve() not in (Path(p).resolve(), *Path(p).resolve().parents)
    ]
    if outside:
        env["PYTHONPATH"] = os.pathsep.join(outside)
    env |= {"CUDA_VISIBLE_DEVICES": "0", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    overrides = [
        "data=folder",
        f"data.root={identity_tree}",
        "data.batch_size=4",
        "augment.train.crop.size=32",
        f"backend={backend}",
        f"backend.device={backend_device}",
        f"trainer.device={trainer_device}",
        *(["backend.num_workers=0"] if backend == "torch" else []),
    ]
    return overrides, env


@pytest.mark.slow
def test_the_placement_probe_runs_from_any_directory_without_the_tree_on_the_path(
    identity_tree: Path, tmp_path: Path
) -> None:
    """The GPU test below runs this probe: here on the CPU, started from a folder outside
    the tree with neither the tree nor its tests on PYTHONPATH, it finds dali_pipes (it
    once imported the tests' helpers, which only pytest puts on the path)."""
    overrides, env = local_rank_one(identity_tree, "torch", "cpu", "cpu")
    seen = placement(tmp_path, env, *overrides)
    assert seen == {"model": "cpu", "loader": "cpu", "images": "cpu"}


@gpu
@pytest.mark.slow
@pytest.mark.parametrize("backend_device", ["gpu", "cpu"])
def test_a_process_given_one_gpu_uses_it_as_local_rank_one(
    identity_tree: Path, tmp_path: Path, backend_device: str
) -> None:
    """Per-rank CUDA_VISIBLE_DEVICES (as srun --gpus-per-task=1 sets it): LOCAL_RANK=1 sees
    one device, which is its GPU."""
    overrides, env = local_rank_one(identity_tree, "dali", backend_device, "cuda")
    seen = placement(tmp_path, env, *overrides)
    assert seen == {"model": "cuda:0", "loader": "cuda:0", "images": "cuda:0"}


def test_srun_tasks_without_a_rendezvous_address_fail_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dali_pipes.runtime import distributed

    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    slurm(monkeypatch, procid=1, ntasks=4, localid=1, SLURM_NTASKS_PER_NODE="4")
    with pytest.raises(ConfigError, match="MASTER_ADDR and MASTER_PORT is not set") as err:
        distributed.init(torch.device("cpu"))
    assert "\n" not in str(err.value)


def test_srun_tasks_join_the_group_with_slurms_rank_and_world_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dali_pipes.runtime import distributed

    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    slurm(monkeypatch, procid=2, ntasks=4, localid=0, SLURM_NTASKS_PER_NODE="1")
    monkeypatch.setenv("MASTER_ADDR", "localhost")
    monkeypatch.setenv("MASTER_PORT", "29599")
    seen: dict[str, Any] = {}
    monkeypatch.setattr(distributed.tdist, "init_process_group", lambda **kw: seen.update(kw))
    distributed.init(torch.device("cpu"))
    assert (seen["rank"], seen["world_size"], seen["backend"]) == (2, 4, "gloo")
