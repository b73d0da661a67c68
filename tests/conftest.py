"""Shared fixtures: tiny generated ImageFolder trees, real photos (shared or committed), devices."""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torchvision.io import encode_jpeg

from dali_pipes.selfcheck import PHOTOS as SHIPPED_PHOTOS

#: Fixtures for expensive things made once per test run and shared by every xdist worker
#: (a wheel, torchrun training runs): tests/helpers/shared.py.
pytest_plugins = ["helpers.shared"]

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = REPO.parent / "shared" / "data"
PHOTOS = Path(os.environ.get("DALI_PIPES_PHOTOS", SHARED / "photos"))
CORNER = Path(os.environ.get("DALI_PIPES_CORNER", SHARED / "corner"))
#: 13 real photos shipped in the package for the self-check (dali_pipes/selfcheck/photos/
#: SOURCE.md): textured, in 3 class folders, baseline and progressive, six chroma
#: subsamplings, portrait, landscape and odd sizes. The stand-in for PHOTOS in a clone
#: without ../shared.
BUNDLED_PHOTOS = SHIPPED_PHOTOS

HAS_CUDA = torch.cuda.is_available()

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one pytest-xdist worker per core. Each worker, and each training
    # process it starts, gets one torch intra-op thread (as torchrun gives each local
    # rank): with a thread per core in every process, OpenMP threads spinning for cores
    # the other worker holds made two concurrent training runs take 63 s instead of 34.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
gpu = pytest.mark.gpu


def pytest_report_header(config: pytest.Config) -> str:
    root = PHOTOS if PHOTOS.is_dir() else BUNDLED_PHOTOS
    count = sum(1 for p in root.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))
    return f"real photos: {root} ({count} files)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow``-marked tests run first (``make test`` runs the suite on two pytest-xdist
    workers: started first, the long ones do not leave one worker alone at the end), and
    ``gpu``-marked tests skip themselves on a machine without CUDA."""
    items.sort(key=lambda item: "slow" not in item.keywords)  # stable: file order kept
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the imports and the collection made lives as long as the run: frozen out of
    the garbage collector's sight, the full collections made while tests run skip it, and
    a process forked from this one (a DataLoader's worker) does not copy the pages it
    shares with this one when it collects."""
    gc.collect()
    gc.freeze()


#: The ``record_property`` key whose value a test wants printed at the end of the run.
SUMMARY = "summary"
_summaries: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the lines tests recorded under :data:`SUMMARY`: a report's user properties
    reach the controlling process under pytest-xdist, where a worker's prints do not."""
    if report.when == "call":
        _summaries.extend(str(v) for k, v in report.user_properties if k == SUMMARY)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what tests asked to be printed (e.g. how many GPU graphs were traced)."""
    if _summaries:
        terminalreporter.section("recorded by tests")
        for line in sorted(set(_summaries)):
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True, scope="session")
def _sample_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Generate the embedded sample dataset into this run's cache, not ~/.cache: one cache
    for all xdist workers of the run (their temporary directories' parent), so each size of
    the set is generated once, not once per worker (the generator is safe to race)."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ.setdefault("DALI_PIPES_CACHE", str(run / "sample-cache"))


def write_jpeg(path: Path, pixels: np.ndarray, quality: int = 95) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tensor = torch.from_numpy(np.ascontiguousarray(pixels)).permute(2, 0, 1).contiguous()
    path.write_bytes(bytes(encode_jpeg(tensor, quality=quality).numpy()))


def identity_colour(k: int) -> np.ndarray:
    """A flat colour that survives JPEG, resizing and cropping and names sample k."""
    return np.array([40 + 20 * (k % 10), 40 + 20 * ((k // 10) % 10), 200], dtype=np.uint8)


def colour_id(rgb: np.ndarray) -> int:
    r, g = (np.rint((np.asarray(rgb[:2], dtype=np.float64) - 40) / 20)).astype(int)
    return int(r + 10 * g)


#: Class folder -> number of images in the identity tree (uneven on purpose, 17 in all).
IDENTITY_CLASSES = {"ant": 5, "bee": 7, "cat": 5}


@pytest.fixture(scope="session")
def identity_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ImageFolder tree whose every image is a flat colour encoding its sample index
    (in ImageFolder order), with varied sizes and aspect ratios."""
    root = tmp_path_factory.mktemp("identity")
    rng = np.random.default_rng(0)
    k = 0
    for name, count in IDENTITY_CLASSES.items():
        for i in range(count):
            h, w = (int(v) for v in rng.integers(40, 120, size=2))
            pixels = np.broadcast_to(identity_colour(k), (h, w, 3))
            write_jpeg(root / name / f"img_{i:02d}.jpg", pixels)
            k += 1
    (root / "bee" / "notes.txt").write_text("not an image; ImageFolder ignores it\n")
    return root


@pytest.fixture(scope="session")
def identity_parts(
    identity_tree: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """The identity tree split into two ImageFolder trees, ``ant`` and ``bee`` in the first,
    ``cat`` in the second: mixed in that order, mix index k is the identity image k."""
    root = tmp_path_factory.mktemp("identity-parts")
    for part, names in (("a", ("ant", "bee")), ("b", ("cat",))):
        for name in names:
            shutil.copytree(identity_tree / name, root / part / name)
    return root / "a", root / "b"


@pytest.fixture(scope="session")
def unique_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The identity tree's 17 images, each in a class folder of its own (``s00`` ...): the
    label names the sample even when augmentation changes the colours."""
    root = tmp_path_factory.mktemp("unique")
    rng = np.random.default_rng(1)
    for k in range(sum(IDENTITY_CLASSES.values())):
        h, w = (int(v) for v in rng.integers(40, 120, size=2))
        write_jpeg(root / f"s{k:02d}" / "img.jpg", np.broadcast_to(identity_colour(k), (h, w, 3)))
    return root


@pytest.fixture(scope="session")
def photos() -> Path:
    """The 213 shared photos (``../shared/data/photos`` or ``$DALI_PIPES_PHOTOS``), for
    tests that need that set itself; they skip without it."""
    if not PHOTOS.is_dir():
        pytest.skip(f"real photos not found at {PHOTOS}")
    return PHOTOS


@pytest.fixture(scope="session")
def real_photos() -> Path:
    """Real photos for the geometry-sensitive tests: the 213 shared ones where they are,
    else the 13 shipped in the package, so a bare clone runs these tests, not skips them."""
    return PHOTOS if PHOTOS.is_dir() else BUNDLED_PHOTOS


LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


@pytest.fixture(autouse=True, scope="module")
def _no_plug_in_left_that_workers_cannot_import() -> Iterator[None]:
    """A test file leaves no plug-in registered that a fresh interpreter cannot import
    (one defined in a module made at run time). After one, the torch backend's workers of
    every later test on this xdist worker would be forked from the test process, with its
    threads, instead of started from the forkserver (dali_pipes.runtime.pools)."""
    from dali_pipes.runtime.pools import CallersEnvironment

    portable = CallersEnvironment().portable
    yield
    left = CallersEnvironment()
    assert left.portable or not portable, (
        f"plug-in modules left registered that workers cannot import: {left.modules}; "
        "register them inside a registry's restored() block"
    )


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a plain single process, whatever launched pytest."""
    for key in list(os.environ):
        if key in LAUNCH_VARS or key.startswith("SLURM_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Any]:
    """A real S3 server (moto's standalone server, a separate process) on 127.0.0.1, for
    the session; stopped at its end."""
    from helpers.s3server import S3Server

    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """This process pointed at the session's S3 server by the standard AWS variables."""
    from dali_pipes.data.s3 import forget_clients

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    forget_clients()
    yield s3_server
    forget_clients()
