"""A process as a launcher would start it: the CUDA devices it sees, Slurm's variables,
a small config, and the one-line check of an error message."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from dali_pipes import compose_config

CPU = torch.device("cpu")
GPU0 = torch.device("cuda", 0)


def cuda(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Pretend ``count`` CUDA devices are visible (0: CUDA unusable)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def synthetic_cfg(*overrides: str) -> Any:
    """A config over a few synthetic samples, with ``overrides``."""
    return compose_config(["data=synthetic", "data.num_samples=8", *overrides])


def slurm(
    monkeypatch: pytest.MonkeyPatch,
    *,
    procid: int,
    ntasks: int,
    localid: int,
    step: bool = True,
    **extra: str,
) -> None:
    """The variables srun sets for one task of a job step."""
    env = {
        "SLURM_JOB_ID": "42",
        "SLURM_PROCID": str(procid),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_LOCALID": str(localid),
        **({"SLURM_STEP_ID": "0"} if step else {}),
        **extra,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
