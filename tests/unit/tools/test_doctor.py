"""The doctor's placements: what it measures with and without a GPU, and which it picks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.launch import CPU, GPU0, cuda, synthetic_cfg

from dali_pipes.backends.specs import DaliBackend, TorchBackend
from dali_pipes.config.loaders import devices_of
from dali_pipes.runtime.devices import Devices
from dali_pipes.tools.doctor import Candidate, _pick, candidates
from dali_pipes.tools.doctor_report import placement_table

ROOT = Path(__file__).resolve().parents[1]


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------- doctor


def test_the_doctor_measures_cpu_placements_without_a_gpu_and_gpu_ones_with_one() -> None:
    on_cpu = [c.name for c in candidates(DaliBackend(device="cpu"), gpu=False)]
    assert on_cpu == ["dali-cpu -> cpu model", "torch -> cpu model"]
    on_gpu = candidates(TorchBackend(device="gpu", num_workers=3), gpu=True)
    assert [c.name for c in on_gpu] == [
        "dali-gpu -> gpu model",
        "dali-cpu -> gpu model",
        "torch -> gpu model",
    ]
    assert on_gpu[1].overrides == "backend=dali backend.device=cpu trainer.device=cuda"
    torch_gpu = on_gpu[2].backend
    assert isinstance(torch_gpu, TorchBackend) and torch_gpu.num_workers == 3, "configured options"


def row(name: str, ips: float | None, share: float = 0.5) -> dict[str, Any]:
    return {
        "name": name,
        "overrides": f"{name} overrides",
        "images_per_s": ips,
        "data_wait": None if ips is None else 1 - share,
        "vs_ceiling": None if ips is None else share,
        "fed": share >= 0.9,
        "note": "",
    }


def test_the_doctor_picks_the_fastest_placement_but_keeps_an_earlier_one_within_min_gain() -> None:
    rows = [row("configured", 100.0), row("faster", 102.0), row("fastest", 150.0)]
    assert _pick(rows, 0.03)["name"] == "fastest"  # type: ignore[index]
    assert _pick(rows[:2], 0.03)["name"] == "configured"  # type: ignore[index]
    assert _pick([row("gone", None)], 0.03) is None


def test_the_doctor_says_whether_its_pick_keeps_the_model_fed() -> None:
    fed, starved = row("dali", 95.0, 0.95), row("torch", 40.0, 0.4)
    report = {
        "placement_ceiling_images_per_s": 100.0,
        "placement_model_device": "cuda:0",
        "placements": [fed, starved, {**row("dali-gpu", None), "note": "unavailable: no GPU"}],
        "recommended_placement": fed,
    }
    text = "\n".join(placement_table(report))
    assert "use dali overrides: the fastest, and it keeps the model fed" in text
    assert "unavailable: no GPU" in text
    text = "\n".join(placement_table({**report, "recommended_placement": starved}))
    assert "no placement keeps the model fed" in text and "input-bound" in text


def test_candidate_overrides_select_the_placement_they_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 1)
    for candidate in candidates(DaliBackend(), gpu=True):
        devices = devices_of(synthetic_cfg(*candidate.overrides.split()))
        assert devices.model == GPU0, candidate.name
        assert (devices.made == CPU) == (candidate.backend.device == "cpu"), candidate.name
    cpu_torch = Candidate(TorchBackend(device="cpu"), "cpu")
    assert devices_of(synthetic_cfg(*cpu_torch.overrides.split())) == Devices(CPU, CPU)
