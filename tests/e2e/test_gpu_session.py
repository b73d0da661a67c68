"""``benchmarks/gpu-session.sh`` on a machine without a GPU (``DRY_RUN=1``): its stages run in
their time boxes within one budget, and after each one the logs and the gpu suite's JSON
record are in ``$OUT``'s tarball, also when a stage is cut short.

The whole dry run (every stage, tiny) is ``DRY_RUN=1 LOGS=/tmp/gpu-dry OUT=/tmp/gpu-dry-out
bash benchmarks/gpu-session.sh`` (a few minutes on 2 cores); here the tests stage alone,
over one file's gpu tests, which skip without CUDA.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from dali_pipes.tools.provenance import commit

SCRIPT = REPO / "benchmarks" / "gpu-session.sh"
ONE_FILE = "tests/unit/runtime/test_distributed.py"  # two gpu tests


def session(
    tmp_path: Path, *stages: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    variables = {
        **os.environ,
        "DRY_RUN": "1",
        "LOGS": str(tmp_path / "logs"),
        "OUT": str(out),
        "PY": sys.executable,
        "GPU_TESTS": ONE_FILE,
        "WORKERS": "1",  # one pytest-xdist worker: the -v lines are xdist's all the same
        "DALI_PIPES_COMMIT": "ee0ee68",
        **env,
    }
    done = subprocess.run(
        ["bash", str(SCRIPT), *stages],
        env=variables,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, out / "gpu-session.tgz"


def members(tarball: Path) -> dict[str, bytes]:
    with tarfile.open(tarball) as tar:
        return {
            m.name.removeprefix("./"): tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def record(files: dict[str, bytes]) -> dict[str, Any]:
    saved: dict[str, Any] = json.load(io.BytesIO(files["gpu-tests.json"]))
    return saved


@pytest.mark.slow
def test_the_tests_stage_records_the_suite_in_the_tarball(tmp_path: Path) -> None:
    done, tarball = session(tmp_path, "tests")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = members(tarball)
    assert {"gpu-tests.log", "gpu-tests.xml", "gpu-tests.json", "stages.txt"} <= set(files)
    saved = record(files)
    tests = saved["gpu_tests"]
    # the file's two gpu tests, skipped without CUDA, under pytest-xdist
    assert (tests["collected"], tests["skipped"], tests["failed"]) == (2, 2, 0)
    # this checkout's own commit (DALI_PIPES_COMMIT names a copy without .git, as the GPU's)
    assert saved["commit"] == commit() and saved["kind"] == "cpu"
    assert "SKIPPED tests/unit/runtime/test_distributed.py::" in done.stdout  # as they come
    stages = files["stages.txt"].decode()
    assert "tests rc=0" in stages and "dry run" in stages


@pytest.mark.slow
def test_a_stage_cut_by_its_time_box_still_leaves_its_log_and_record(tmp_path: Path) -> None:
    done, tarball = session(tmp_path, "tests", BOX_TESTS="3")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    files = members(tarball)
    stages = files["stages.txt"].decode()
    # rc 124: stopped by the box's SIGINT; 137: killed 15 s later (a loaded machine).
    assert re.search(r"tests rc=(124|137) in \d+ s \(time box reached\)", stages), stages
    assert "failed: tests" in stages
    assert record(files)["gpu_tests"]["passed"] == 0  # written from what the log holds


def test_an_unknown_stage_stops_the_session_before_anything_runs(tmp_path: Path) -> None:
    done, tarball = session(tmp_path, "tests", "nothing")
    assert done.returncode == 2 and "unknown stage nothing" in done.stdout
    assert not tarball.exists()


def test_a_stage_past_the_budget_is_skipped_and_said_so(tmp_path: Path) -> None:
    done, tarball = session(tmp_path, "tests", BUDGET="5")
    assert done.returncode == 0, done.stderr[-3000:]
    files = members(tarball)
    assert "=== tests skipped:" in files["stages.txt"].decode()
    assert "gpu-tests.log" not in files


def test_a_copy_inside_another_repository_records_no_commit_of_that_repository(
    tmp_path: Path,
) -> None:
    outer = tmp_path / "outer"
    (outer / "copy" / "benchmarks").mkdir(parents=True)
    git = ["git", "-C", str(outer), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "theirs"], check=True)
    script = outer / "copy" / "benchmarks" / SCRIPT.name
    shutil.copy(SCRIPT, script)
    env = {k: v for k, v in os.environ.items() if k not in ("DALI_PIPES_COMMIT", "COMMIT")}
    env |= {"DRY_RUN": "1", "LOGS": str(tmp_path / "logs"), "OUT": str(tmp_path / "out")}
    done = subprocess.run(
        ["bash", str(script), "nothing"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2  # stopped before any stage ran
    assert " at commit unknown," in done.stdout, done.stdout
