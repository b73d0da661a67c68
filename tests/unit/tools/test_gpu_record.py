"""``benchmarks/gpu_record.py``: the GPU session's JSON records, from what pytest and the
default job leave behind, also when a run was cut short."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO

SCRIPT = REPO / "benchmarks" / "gpu_record.py"

# What a `pytest -v -n 2` run cut short prints: two results, one test begun and never ended.
CUT_LOG = """\
============================= test session starts ==============================
created: 2/2 workers
2 workers [4 items]

tests/a/test_x.py::test_one[gpu]
tests/a/test_x.py::test_two
[gw0] [ 25%] PASSED tests/a/test_x.py::test_one[gpu]
tests/b/test_y.py::test_long
[gw1] [ 50%] FAILED tests/a/test_x.py::test_two
"""

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" failures="1" errors="0" skipped="1">
<testcase classname="tests.a.test_x" name="test_one[gpu]" time="1.5"/>
<testcase classname="tests.a.test_x" name="test_two" time="0.2"><failure message="x"/></testcase>
<testcase classname="tests.b.test_y" name="test_long" time="42.0"/>
<testcase classname="tests.b.test_y" name="test_skip" time="0.0"><skipped message="no"/></testcase>
</testsuite></testsuites>
"""


@pytest.fixture(scope="module")
def record() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_record", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cut_off_run_says_what_failed_and_what_never_reported(record: ModuleType) -> None:
    tests = record.from_log(CUT_LOG)
    assert (tests["collected"], tests["passed"], tests["failed"], tests["skipped"]) == (4, 1, 1, 0)
    assert tests["not_reported"] == 2
    assert tests["failures"] == ["tests/a/test_x.py::test_two"]
    assert tests["unfinished"] == ["tests/b/test_y.py::test_long"]


def test_a_finished_run_is_read_from_its_junit_report_with_durations(record: ModuleType) -> None:
    tests = record.from_junit(JUNIT)
    assert (tests["collected"], tests["passed"], tests["failed"], tests["skipped"]) == (4, 2, 1, 1)
    assert tests["slowest"][0] == {"test": "tests/b/test_y.py::test_long", "seconds": 42.0}


def test_the_suite_record_sums_its_runs_and_names_commit_and_machine(
    record: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "suite.log").write_text(CUT_LOG)
    (tmp_path / "memory.log").write_text("...\n== 1 failed, 1 passed, 32 deselected in 16.48s ==\n")
    (tmp_path / "memory.xml").write_text("<testsuites><testsuite")  # cut while written
    out = tmp_path / "gpu-tests.json"
    env = {"DALI_PIPES_COMMIT": "ee0ee68"}
    monkeypatch.setattr(record, "commit", lambda: env["DALI_PIPES_COMMIT"])
    record.main(
        [
            "suite",
            *("--part", str(tmp_path / "suite.log"), str(tmp_path / "suite.xml")),
            *("--part", str(tmp_path / "memory.log"), str(tmp_path / "memory.xml")),
            *("--out", str(out)),
        ]
    )
    saved = json.loads(out.read_text())
    assert {k: saved["gpu_tests"][k] for k in ("collected", "passed", "failed", "skipped")} == {
        "collected": 6,
        "passed": 2,
        "failed": 2,
        "skipped": 0,
    }
    assert saved["commit"] == "ee0ee68" and saved["date"]
    assert {"gpu", "cores", "c_compiler", "python_headers"} <= set(saved["machine"])


def test_the_kind_of_gpu_names_the_records_folder(record: ModuleType) -> None:
    assert record._kind("NVIDIA H200") == "h200"
    assert record._kind("NVIDIA H100 80GB HBM3") == "h100"
    assert record._kind("NVIDIA A100-SXM4-80GB") == "a100"
    assert record._kind("") == "cpu"


def test_the_default_jobs_record_is_its_last_epoch(record: ModuleType, tmp_path: Path) -> None:
    with (tmp_path / "metrics.csv").open("w", newline="") as f:
        rows = csv.DictWriter(f, ["epoch", "val_top1", "val_top5", "data_wait"])
        rows.writeheader()
        rows.writerow({"epoch": 0, "val_top1": 0.5, "val_top5": 0.9, "data_wait": 0.3})
        rows.writerow({"epoch": 29, "val_top1": 0.9958, "val_top5": 1.0, "data_wait": 0.05})
    out = tmp_path / "train.json"
    record.main(["train", "--run", str(tmp_path), "--out", str(out)])
    job = json.loads(out.read_text())["default_job"]
    assert job == {"epoch": 29, "val_top1": 0.9958, "val_top5": 1, "data_wait": 0.05}


def test_an_interrupted_runs_junit_report_keeps_the_logs_collected_count(
    record: ModuleType, tmp_path: Path
) -> None:
    """pytest writes its JUnit report on an interrupt too, with only the tests that ended."""
    (tmp_path / "run.log").write_text(CUT_LOG)
    two = JUNIT.replace('tests="4"', 'tests="2"').split('<testcase classname="tests.b')[0]
    (tmp_path / "run.xml").write_text(two + "</testsuite></testsuites>\n")
    tests = record.part(tmp_path / "run.log", tmp_path / "run.xml")
    assert (tests["collected"], tests["passed"], tests["failed"], tests["not_reported"]) == (
        4,
        1,
        1,
        2,
    )
    assert tests["unfinished"] == ["tests/b/test_y.py::test_long"]


def test_the_collected_listing_names_the_tests_a_cut_run_never_reported(
    record: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "run.log").write_text(CUT_LOG)
    listing = tmp_path / "collected.txt"
    names = ["tests/a/test_x.py::test_one[gpu]", "tests/a/test_x.py::test_two"]
    names += ["tests/b/test_y.py::test_long", "tests/b/test_y.py::test_late"]
    listing.write_text("\n".join(names) + "\n\n4/90 tests collected (86 deselected) in 3.1s\n")
    saved = record.suite([(tmp_path / "run.log", tmp_path / "none.xml")], 5, listing)
    tests = saved["gpu_tests"]
    assert (tests["collected"], tests["not_reported"]) == (4, 2)
    assert tests["never_reported"] == names[2:]
    assert tests["unfinished"] == ["tests/b/test_y.py::test_long"]


def test_a_run_with_deselected_tests_counts_only_the_selected_ones(record: ModuleType) -> None:
    """The memory tests run alone with ``-k``: pytest collects the whole file, deselects the
    rest, and only the selected tests are the run's."""
    log = """\
collecting ... collected 34 items / 32 deselected / 2 selected

tests/e2e/test_reliability.py::test_flat[dali] PASSED                    [ 50%]
tests/e2e/test_reliability.py::test_flat[torch] SKIPPED (needs a CUDA GPU) [100%]
"""
    tests = record.from_log(log)
    assert (tests["collected"], tests["passed"], tests["skipped"]) == (2, 1, 1)
    assert tests["not_reported"] == 0
    plain = record.from_log("collecting ... collected 3 items\n")
    assert (plain["collected"], plain["not_reported"]) == (3, 3)
