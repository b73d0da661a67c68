"""What bench and doctor say to try next: the answer to the user's question first, then
the changes that apply to this machine and this config, as overrides to type."""

from __future__ import annotations

import math
from typing import Any

from dali_pipes.tools.advice import bench_advice, doctor_advice


def bench(**rates: float) -> dict[str, Any]:
    return {
        "results": [
            {"name": k.replace("_", "-"), "images_per_s_median": v} for k, v in rates.items()
        ]
    }


def test_bench_names_the_fastest_loader_against_the_baseline_and_the_missing_gpu() -> None:
    lines = bench_advice(bench(baseline=1000, torch=800, dali_cpu=2500, dali_gpu=math.nan))
    assert (
        lines[0]
        == "fastest here: dali-cpu, 2.50x the DataLoader baseline (2500 against 1000 images/s)"
    )
    assert lines[1].startswith("no GPU here: on a GPU machine, backend=dali decodes on the GPU")
    assert lines[2].startswith(
        "whether training gets faster depends on your model: run python -m dali_pipes.doctor"
    )


def test_bench_says_so_when_the_baseline_wins() -> None:
    [verdict, doctor] = bench_advice(bench(baseline=1000, dali_cpu=900))
    assert verdict.startswith(
        "the DataLoader baseline is faster here than every dali_pipes loader "
        "(best: dali-cpu, 0.90x)"
    )
    assert "doctor" in doctor


def doctor(share: float, **extra: Any) -> dict[str, Any]:
    return {
        "loader_vs_synthetic": share,
        "data_wait": 1 - share,
        "loader_images_per_s": 100.0,
        "backend": {"name": "dali"},
        **extra,
    }


def test_a_fed_model_is_told_to_look_at_its_step_not_its_loader() -> None:
    [line] = doctor_advice(doctor(0.98), {"name": "folder", "cache": None}, cuda=False)
    assert line.startswith("training is not waiting for data (98% of the synthetic-data rate)")


def test_a_rate_above_the_synthetic_one_is_called_noise_not_a_verdict() -> None:
    [line] = doctor_advice(doctor(1.19), {"name": "folder", "cache": None}, cuda=False)
    assert line.startswith(
        "the measurement is too noisy to tell: fed by the loader the step ran at 119%"
    )
    assert doctor_advice(doctor(1.04), {"name": "folder", "cache": None}, cuda=False)[0].startswith(
        "training is not waiting for data"
    )


def test_a_waiting_model_gets_the_changes_that_apply_most_promising_first() -> None:
    report = doctor(
        0.6,
        tuned_images_per_s=150.0,
        tuned_config="outputs/doctor/backend/dali_tuned.yaml",
        recommended_placement={"note": "", "overrides": "backend=torch"},
    )
    lines = doctor_advice(report, {"name": "imagenet", "cache": None}, cuda=False)
    assert lines[0] == (
        "training waits for data 40% of the time and runs at 60% of its synthetic-data rate; "
        "try, in this order:"
    )
    assert lines[1] == (
        "  - the tuned settings: python -m dali_pipes.train --config-dir outputs/doctor "
        "backend=dali_tuned"
    )
    assert lines[2] == "  - the fastest placement measured: backend=torch"
    assert lines[3].startswith("  - a GPU:")
    assert lines[4].startswith("  - many small files: pack them")
    assert lines[5].startswith("  - a dataset that fits in memory: data.cache=ram")
    assert lines[6].startswith("  (docs: ")


def test_advice_that_does_not_apply_is_left_out() -> None:
    report = doctor(
        0.6,
        tuned_images_per_s=101.0,
        tuned_config="o/backend/dali_tuned.yaml",
        recommended_placement={"note": "configured", "overrides": "backend=dali"},
    )
    lines = doctor_advice(report, {"name": "shards", "cache": "ram"}, cuda=True)
    assert len(lines) == 2 and lines[1].startswith("  (docs: ")
