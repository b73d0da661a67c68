"""Fixtures for what several tests need and is expensive to make: each is made once per
test run for every pytest-xdist worker (:func:`helpers.once.made_once`) and registered for
every test by ``tests/conftest.py`` (``pytest_plugins``).

- ``wheel``: the package built as a wheel, from a clean copy of the sources.
- ``torchrun_reference``: a torchrun training run on 2 ranks, finished.
- ``preempted_on_2_ranks``: the same run SIGTERMed inside its second epoch.

A torchrun job costs a launcher and a process per rank, each importing torch, DALI and
dali_pipes; a wheel costs a pip subprocess: tests that only need to look at one take the
one made here instead of making their own. What is made is read-only: a test that resumes
a run copies its ``output_dir`` into its own ``tmp_path`` first (:func:`own_copy`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.once import made_once
from helpers.runs import PREEMPTIBLE, REPO, preempt_in_epoch_1, torchrun


@dataclass(frozen=True)
class PreemptedRun:
    """A run SIGTERMed inside an epoch: its output_dir, the mid-epoch checkpoint it wrote,
    its exit code and its stderr."""

    out: Path
    checkpoint: Path
    returncode: int
    stderr: str


def own_copy(run: Path, into: Path) -> Path:
    """A shared run's output_dir copied to ``into``, for a test to resume or change."""
    shutil.copytree(run, into)
    return into


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dali_pipes built as a wheel (``pip wheel --no-deps --no-build-isolation``) from a
    clean copy of ``pyproject.toml``, ``README.md``, ``dali_pipes/`` and ``conf/``: a
    ``build/`` folder left in the checkout can hold modules the current settings would
    leave out, and would hide exactly what a test of the wheel looks for."""

    def make(folder: Path) -> None:
        src = folder / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(REPO / name, src / name)
        for top in ("dali_pipes", "conf"):
            shutil.copytree(REPO / top, src / top, ignore=shutil.ignore_patterns("__pycache__"))
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir"]
        build = subprocess.run(
            [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(folder)],
            capture_output=True,
            text=True,
        )
        assert build.returncode == 0, build.stdout + build.stderr

    folder, _ = made_once(tmp_path_factory, "wheel", make)
    (built,) = folder.glob("dali_pipes-*.whl")
    return built


@pytest.fixture(scope="session")
def torchrun_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output_dir of :data:`helpers.runs.PREEMPTIBLE` trained on 2 ranks under torchrun
    from start to end, uninterrupted (720 images, 3 epochs): what a resumed run must equal,
    and a distributed run that finished."""

    def make(folder: Path) -> None:
        torchrun(2, *PREEMPTIBLE, f"output_dir={folder / 'run'}")

    folder, _ = made_once(tmp_path_factory, "torchrun-reference-2-ranks", make)
    return folder / "run"


@pytest.fixture(scope="session")
def preempted_on_2_ranks(tmp_path_factory: pytest.TempPathFactory) -> PreemptedRun:
    """:data:`helpers.runs.PREEMPTIBLE` on 2 ranks under torchrun, SIGTERMed inside epoch 1
    (:func:`helpers.runs.preempt_in_epoch_1`)."""

    def make(folder: Path) -> dict[str, object]:
        stopped, returncode, stderr = preempt_in_epoch_1(2, folder / "run")
        return {"checkpoint": stopped.name, "returncode": returncode, "stderr": stderr}

    folder, facts = made_once(tmp_path_factory, "preempted-on-2-ranks", make)
    out = folder / "run"
    return PreemptedRun(
        out,
        out / "checkpoints" / str(facts["checkpoint"]),
        int(facts["returncode"]),
        str(facts["stderr"]),
    )
