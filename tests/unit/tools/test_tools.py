"""bench and doctor run end to end on a tiny dataset and report the promised fields.

No test asserts a speed: figures are only checked to be present and finite.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import REPO
from helpers.png import check_png
from helpers.warm import python

from dali_pipes import compose_config
from dali_pipes.tools.bench import run_bench
from dali_pipes.tools.doctor import run_doctor

ROOT = REPO
SMALL = ["augment.train.crop.size=32", "data.batch_size=4"]


@pytest.mark.slow
def test_bench_measures_every_candidate_and_writes_json(
    identity_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            *SMALL,
            "bench.repeats=2",
            "bench.warmup_images=8",
            "bench.min_images=24",
            "bench.workers=1",
            f"bench.out={out}",
        ],
        config_name="bench",
    )
    report = run_bench(cfg)
    assert json.loads(out.read_text()) == json.loads(json.dumps(report, default=str))
    for key in ("date", "machine", "versions", "command", "dataset", "batch_size", "results"):
        assert key in report
    assert report["versions"]["nvidia.dali"] and report["machine"]["cores"] >= 1
    rows = {r["name"]: r for r in report["results"]}
    assert set(rows) == {"baseline", "torch", "dali-cpu", "dali-gpu", "synthetic", "decode"}
    for name in ("baseline", "torch", "dali-cpu", "synthetic", "decode"):
        row = rows[name]
        assert len(row["repeats"]) == 2 and all(r > 0 for r in row["repeats"])
        assert row["images_per_s_min"] <= row["images_per_s_median"] <= row["images_per_s_max"]
        assert math.isfinite(row["vs_baseline"]) and math.isfinite(row["pct_decode_ceiling"])
    for name in ("baseline", "torch", "dali-cpu"):
        assert 0 < rows[name]["cpu_util"] and rows[name]["peak_host_mb"] > 0
    assert rows["baseline"]["vs_baseline"] == 1.0
    table = capsys.readouterr().out
    assert "| loader |" in table and "| dali-cpu |" in table
    # the chart beside the JSON: one bar per measured image loader (the decode ceiling is a
    # line, the synthetic loader's figure is in the title)
    off = ("decode", "synthetic")
    bars = sum(1 for r in report["results"] if r["repeats"] and r["name"] not in off)
    check_png(out.with_suffix(".png"), width=800, height=round(100 * (1.2 + 0.45 * bars)))


def test_bench_compares_folder_shards_and_cache_on_the_same_data(
    identity_tree: Path, tmp_path: Path
) -> None:
    shards = tmp_path / "shards"
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            *SMALL,
            "bench.repeats=1",
            "bench.warmup_images=4",
            "bench.min_images=17",
            "bench.workers=1",
            "bench.candidates=[dali-cpu,dali-cpu-shards,torch-shards,decode-shards,"
            "dali-cpu-max-side,decode-max-side,cache-ram,cache-gpu]",
            f"bench.shards={shards}",
            "bench.max_side=20",
            f"bench.out={tmp_path / 'bench.json'}",
        ],
        config_name="bench",
    )
    rows = {r["name"]: r for r in run_bench(cfg)["results"]}
    assert (shards / "dataset.json").exists(), "the data was packed for the shard candidates"
    measured = ["dali-cpu", "dali-cpu-shards", "torch-shards", "decode-shards", "cache-ram"]
    for name in [*measured, "dali-cpu-max-side", "decode-max-side"]:
        assert rows[name]["images_per_s_median"] > 0, name
    assert "the images packed in" in rows["decode-shards"]["note"]
    smaller = Path(f"{shards}-max-side-20")  # the same data stored at most 20 px
    assert json.loads((smaller / "dataset.json").read_text())["settings"]["max_side"] == 20
    assert str(smaller) in rows["dali-cpu-max-side"]["note"]
    assert re.match(r"1 shard in |\d+ shards in ", rows["torch-shards"]["note"])
    assert "decoded once" in rows["cache-ram"]["note"]
    if not torch.cuda.is_available():
        assert rows["cache-gpu"]["note"] == "skipped: no CUDA device"


@pytest.mark.slow
def test_doctor_reports_input_boundness_and_writes_a_usable_tuned_config(
    identity_tree: Path, tmp_path: Path
) -> None:
    out = tmp_path / "doctor"
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            *SMALL,
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            "model=small_cnn",
            "model.arch.width=8",
            "backend.device=cpu",
            "doctor.steps=3",
            "doctor.warmup_steps=1",
            f"doctor.out_dir={out}",
        ],
        config_name="doctor",
    )
    report = run_doctor(cfg)
    for key in (
        "synthetic_images_per_s",
        "loader_images_per_s",
        "loader_vs_synthetic",
        "data_wait",
        "tuned",
        "tuned_images_per_s",
        "trials",
    ):
        assert key in report
    assert 0 <= report["data_wait"] <= 1 and report["synthetic_images_per_s"] > 0
    knobs = {k for t in report["trials"] for k in ("num_threads", "prefetch_queue_depth")}
    assert knobs and len(report["trials"]) > 3
    assert json.loads((out / "doctor.json").read_text())["tuned"] == report["tuned"]
    assert len(report["timeline"]) == 3 and all(0 <= w <= t for w, t in report["timeline"])
    assert report["charts"] == [str(out / "timeline.png"), str(out / "trials.png")]
    check_png(out / "timeline.png", width=800, height=360)
    check_png(
        out / "trials.png", width=800, height=round(100 * (1.2 + 0.35 * len(report["trials"])))
    )

    tuned = out / "backend" / "dali_tuned.yaml"
    composed = compose_config([f"hydra.searchpath=[file://{out}]", "backend=dali_tuned"])
    assert composed.backend.num_threads == report["tuned"]["num_threads"]
    # The command the file advertises works from the command line too.
    done = subprocess.run(
        [
            python(),
            "-m",
            "dali_pipes.train",
            "--config-dir",
            str(out),
            "backend=dali_tuned",
            "data=folder",
            f"data.root={identity_tree}",
            *SMALL,
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            "model=small_cnn",
            "trainer=quick",
            "trainer.epochs=1",
            f"output_dir={tmp_path / 'train'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert tuned.read_text().startswith("# Written by python -m dali_pipes.doctor")


def test_doctor_measures_the_placements_this_machine_has_and_says_which_to_use(
    identity_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            *SMALL,
            "model=small_cnn",
            "model.arch.width=8",
            "backend.device=cpu",
            "backend.num_threads=1",
            "doctor.steps=2",
            "doctor.warmup_steps=1",
            "doctor.tune=false",
            f"doctor.out_dir={tmp_path}",
        ],
        config_name="doctor",
    )
    report = run_doctor(cfg)
    rows = {r["name"]: r for r in report["placements"]}
    if torch.cuda.is_available():
        assert set(rows) == {"dali-gpu -> gpu model", "dali-cpu -> gpu model", "torch -> gpu model"}
    else:
        assert set(rows) == {"dali-cpu -> cpu model", "torch -> cpu model"}
        assert rows["dali-cpu -> cpu model"]["note"] == "configured", "measured once, reused"
    for row in rows.values():
        assert row["images_per_s"] > 0 and 0 <= row["data_wait"] <= 1, row
        assert row["fed"] == (row["vs_ceiling"] >= 0.9)
    pick = report["recommended_placement"]
    assert pick["name"] in rows and pick["images_per_s"] * 1.03 >= max(
        r["images_per_s"] for r in rows.values()
    )
    assert json.loads((tmp_path / "doctor.json").read_text())["recommended_placement"] == pick
    out = capsys.readouterr().out
    assert "placements (ceiling" in out and f"use {pick['overrides']}:" in out
    # The advice is a valid command line: it composes and places as the row says.
    chosen = compose_config(["data=synthetic", *pick["overrides"].split()])
    assert chosen.trainer.device == pick["trainer_device"]
