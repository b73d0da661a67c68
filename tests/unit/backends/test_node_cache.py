"""``data.cache=ram`` under torchrun: the local ranks of a node decode once, hold one copy.

Processes started with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE) and a shared job key stand in for the local ranks of one node; run as a
script, this file is such a rank (``python tests/unit/backends/test_node_cache.py MODE ROOT OUT``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="measures memory and processes in /proc"
)
WORLD = 2
OVERRIDES = [
    "data=folder",
    "data.batch_size=4",
    "seed=2",
    "augment.train.crop.size=32",
    "backend.device=cpu",
]
BIG = (192, 512)  # images, side: 144 MiB decoded, so 1 and 2 copies are far apart
BROKEN = "zz_broken.jpg"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Photo-sized JPEGs in 4 classes: 8 distinct smooth random pictures, each written many
    times (every file is still decoded into a slot of its own), and one broken file last.
    Made once per test run for every xdist worker (helpers/once.py); read-only."""
    from conftest import write_jpeg  # here: run as a rank, this file has no tests/ on its path
    from helpers.once import made_once

    def make(root: Path) -> None:
        rng = np.random.default_rng(0)
        count, side = BIG
        for k in range(8):
            coarse = torch.from_numpy(rng.integers(0, 256, (1, 3, 8, 8)).astype(np.float32))
            pixels = torch.nn.functional.interpolate(coarse, size=(side, side), mode="bilinear")
            path = root / "c0" / f"img_{k:03d}.jpg"
            write_jpeg(path, pixels[0].permute(1, 2, 0).byte().numpy())
        for k in range(1, 4):
            (root / f"c{k}").mkdir()
        for k in range(8, count):
            shutil.copyfile(
                root / "c0" / f"img_{k % 8:03d}.jpg", root / f"c{k % 4}" / f"img_{k:03d}.jpg"
            )
        (root / "c3" / BROKEN).write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")

    return made_once(tmp_path_factory, "node-cache-big-tree", make)[0]


@contextmanager
def private_shm() -> Iterator[Path]:
    """A private directory on the node's tmpfs (where the shared copy goes by default)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    path = base / f"dali_pipes_test_{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def shm() -> Iterator[Path]:
    with private_shm() as path:
        yield path


@pytest.fixture(scope="session")
def node_run(big_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two local ranks with data.cache=ram on the big tree plus one broken file (last, so in
    local rank 1's part), under on_error=skip: what each reported, and what was left. Made
    once per test run for every xdist worker (helpers/once.py)."""
    from helpers.once import made_once

    def make(out: Path) -> dict[str, Any]:
        with private_shm() as shm:
            ranks = run_ranks("batches", big_tree, out, shm, "data.on_error=skip")
            return {"ranks": ranks, "leftovers": leftovers(shm)}

    return made_once(tmp_path_factory, "node-cache-run", make)[1]


def leftovers(directory: Path) -> list[str]:
    """Files the node cache left, besides its one per-user lock file (never deleted)."""
    return sorted(n for n in os.listdir(directory) if n != f"dali_pipes-{os.getuid()}.lock")


def broken_copy(tree: Path, where: Path, name: str) -> Path:
    """A copy of ``tree`` with one broken JPEG at ``name`` (``class/file``)."""
    root = where / "tree"
    shutil.copytree(tree, root)
    (root / name).write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    return root


def run_ranks(
    mode: str, root: Path, out: Path, shm: Path, *extra: str, job: bool = True, timeout: int = 20
) -> list[dict[str, Any]]:
    """Start WORLD local ranks like torchrun would; each returns its rc and report.
    ``timeout``: DALI_PIPES_CACHE_TIMEOUT, the bound on waiting for a silent peer."""
    out.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "MASTER"))}
    env.update(
        WORLD_SIZE=str(WORLD),
        LOCAL_WORLD_SIZE=str(WORLD),
        DALI_PIPES_SHM_DIR=str(shm),
        DALI_PIPES_CACHE_TIMEOUT=str(timeout),
        OMP_NUM_THREADS="1",
    )
    if job:
        env["DALI_PIPES_JOB_KEY"] = uuid.uuid4().hex
    else:
        env.pop("DALI_PIPES_JOB_KEY", None)
    from helpers.warm import python  # here: as a script, this file has no helpers

    procs = [
        subprocess.Popen(
            [python(), __file__, mode, str(root), str(out), *extra],
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(WORLD)
    ]
    results = []
    for r, proc in enumerate(procs):
        try:
            log, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise AssertionError(f"local rank {r} hung") from None
        report = out / f"rank{r}.json"
        result = json.loads(report.read_text()) if report.exists() else {}
        results.append({"rc": proc.returncode, "log": log, **result})
    return results


def decoded_bytes(root: Path) -> int:
    from dali_pipes.image.headers import image_size

    sizes = [image_size(np.fromfile(p, dtype=np.uint8)) for p in root.rglob("img_*.jpg")]
    return sum(3 * h * w for h, w in sizes)


# --------------------------------------------------------------------------- tests


@pytest.mark.slow  # local ranks in processes of their own
def test_two_local_ranks_hold_one_decoded_copy_and_decode_each_image_once(
    node_run: dict[str, Any], big_tree: Path
) -> None:
    need = decoded_bytes(big_tree)
    ranks = node_run["ranks"]
    assert all(r["rc"] == 0 for r in ranks), [r["log"] for r in ranks]
    assert sum(r["decoded_here"] for r in ranks) == BIG[0] + 1
    assert all(r["decoded_here"] > 0 for r in ranks), "both ranks decode a part"
    mapped = {tuple(r["mapped"]) for r in ranks}
    assert len(mapped) == 1, f"both ranks map the same file: {mapped}"
    ((_, file_bytes),) = mapped
    assert need <= file_bytes < need * 1.01
    private = [r["anon_growth"] for r in ranks]
    node = sum(private) + file_bytes
    assert max(private) < 0.2 * need, f"a rank holds a private copy: {private} vs {need}"
    assert node < 1.5 * need, f"the node holds {node / need:.2f} copies"
    assert node_run["leftovers"] == [], "the last rank out removes the shared file"


@pytest.mark.slow  # local ranks in processes of their own
def test_each_local_rank_yields_exactly_the_torch_backends_batches(
    node_run: dict[str, Any],
) -> None:
    assert all(r["rc"] == 0 and r["equal"] for r in node_run["ranks"])


@pytest.mark.slow  # local ranks in processes of their own
def test_every_local_rank_reports_a_bad_file_another_rank_decoded(
    node_run: dict[str, Any], big_tree: Path
) -> None:
    for r in node_run["ranks"]:
        assert list(r["bad_files"]) == [str(big_tree / "c3" / BROKEN)]


@pytest.mark.slow
def test_without_a_job_identity_each_local_rank_decodes_its_own_copy(
    big_tree: Path, tmp_path: Path, shm: Path
) -> None:
    """The control for the memory test: the same measurement sees two copies."""
    need = decoded_bytes(big_tree)
    ranks = run_ranks("memory", big_tree, tmp_path / "out", shm, "data.on_error=skip", job=False)
    assert all(r["rc"] == 0 for r in ranks), [r["log"] for r in ranks]
    assert [r["decoded_here"] for r in ranks] == [BIG[0] + 1] * WORLD
    assert all(r["mapped"] is None for r in ranks)
    assert all(r["anon_growth"] > 0.9 * need for r in ranks)
    assert "no job identity" in ranks[0]["log"]


@pytest.mark.slow  # local ranks in processes of their own
def test_a_bad_file_fails_every_local_rank_in_one_line_and_leaves_nothing(
    identity_tree: Path, tmp_path: Path, shm: Path
) -> None:
    root = broken_copy(identity_tree, tmp_path, "ant/aa_broken.jpg")  # index 0: local rank 0
    ranks = run_ranks("build", root, tmp_path / "out", shm, timeout=300)
    for r in ranks:
        assert r["rc"] == 1 and r["kind"] == "DataError", r["log"]
        assert "aa_broken.jpg: " in r["error"] and "\n" not in r["error"]
    assert "found by local rank 0" in ranks[1]["error"]
    assert ranks[1]["elapsed"] < 60, "the peer fails on the published error, not the timeout"
    assert leftovers(shm) == []


@pytest.mark.slow  # local ranks in processes of their own
def test_a_rank_that_dies_fails_the_others_in_one_line_and_leaves_nothing(
    identity_tree: Path, tmp_path: Path, shm: Path
) -> None:
    ranks = run_ranks("die", identity_tree, tmp_path / "out", shm, timeout=300)
    assert ranks[0]["rc"] == 3  # killed itself while decoding its part
    assert ranks[1]["rc"] == 1 and ranks[1]["kind"] == "PeerFailed", ranks[1]["log"]
    assert "local rank 0 (pid" in ranks[1]["error"] and "exited" in ranks[1]["error"]
    assert ranks[1]["elapsed"] < 60, "a dead peer is noticed at once, not after the timeout"
    assert leftovers(shm) == []


def _local_rank_0_alone(monkeypatch: pytest.MonkeyPatch, shm: Path, timeout: str) -> None:
    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "2",
        "DALI_PIPES_JOB_KEY": uuid.uuid4().hex,
        "DALI_PIPES_SHM_DIR": str(shm),
        "DALI_PIPES_CACHE_TIMEOUT": timeout,
    }.items():
        monkeypatch.setenv(name, value)


def test_a_local_rank_that_never_comes_is_a_one_line_error_after_the_timeout(
    identity_tree: Path, shm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dali_pipes import build_loader, compose_config
    from dali_pipes.backends.cache.shared import PeerFailed

    _local_rank_0_alone(monkeypatch, shm, "1")
    cfg = compose_config([*OVERRIDES, f"data.root={identity_tree}", "data.cache=ram"])
    start = time.monotonic()
    with pytest.raises(PeerFailed, match=r"^data\.cache=ram: local rank 1 did not join .* 1 s"):
        build_loader(cfg, "train")
    assert time.monotonic() - start < 10
    assert leftovers(shm) == []


def test_files_of_a_crashed_run_are_removed_by_the_next_run(
    identity_tree: Path, shm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dali_pipes import build_loader, compose_config
    from dali_pipes.backends.cache.shared import PeerFailed

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names no process
    dead = {"0": {"pid": gone.pid, "start": 1}}
    stale = f"dali_pipes-{os.getuid()}-{'0' * 20}"
    (shm / f"{stale}.state").write_text(json.dumps({"gen": "g", "members": dead}))
    (shm / f"{stale}-g.data").write_bytes(b"\0" * 4096)
    orphan = shm / f"dali_pipes-{os.getuid()}-{'1' * 20}-h.data"  # a cleanup cut short
    orphan.write_bytes(b"\0" * 4096)
    os.utime(orphan, (time.time() - 3600, time.time() - 3600))
    _local_rank_0_alone(monkeypatch, shm, "1")
    cfg = compose_config([*OVERRIDES, f"data.root={identity_tree}", "data.cache=ram"])
    with pytest.raises(PeerFailed):
        build_loader(cfg, "train")
    assert leftovers(shm) == []


# --------------------------------------------------------------------------- one rank


def _anonymous_bytes() -> int:
    """This process's anonymous (private, not file-backed) memory."""
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no Anonymous line in /proc/self/smaps_rollup")


def _shared_mapping() -> list[int] | None:
    """(inode, size) of the node cache's file as mapped in this process."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and "dali_pipes-" in fields[5]:
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            return [int(fields[4]), hi - lo]
    return None


def _rank_main(mode: str, root: str, out: str, *extra: str) -> int:
    """One local rank: build the cached loader and report what the test checks."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: conftest
    import logging

    import torchvision.io  # noqa: F401 - the decoder imports it on first use: not the cache either

    import dali_pipes.backends.cache.ram  # noqa: F401 - its imports' memory is not the cache's
    from dali_pipes import build_loader, compose_config
    from dali_pipes.backends.cache import store as decoded
    from dali_pipes.errors import DaliPipesError

    logging.basicConfig(level=logging.INFO)
    rank = int(os.environ["LOCAL_RANK"])
    overrides = [*OVERRIDES, f"data.root={root}", *extra]
    report: dict[str, Any] = {}
    if mode == "die" and rank == 0:

        def die(*args: Any, **kwargs: Any) -> Any:
            os._exit(3)

        decoded.decode_bytes = die
    before = _anonymous_bytes()
    start = time.monotonic()
    try:
        cache: Any = build_loader(compose_config([*overrides, "data.cache=ram"]), "train")
    except DaliPipesError as exc:
        report = {"error": str(exc), "kind": type(exc).__name__}
        report["elapsed"] = time.monotonic() - start
        Path(out, f"rank{rank}.json").write_text(json.dumps(report))
        return 1
    report["build_s"] = time.monotonic() - start
    report["anon_growth"] = _anonymous_bytes() - before
    report["mapped"] = _shared_mapping()
    report["decoded_here"] = cache.decoded_here
    report["bad_files"] = cache.bad_files
    if mode == "batches":
        ref = build_loader(
            compose_config([*overrides, "backend=torch", "backend.num_workers=0"]), "train"
        )
        equal = True
        for epoch in (0, 1):
            cache.set_epoch(epoch)
            ref.set_epoch(epoch)
            for (a, la), (b, lb) in zip(cache, ref, strict=True):
                equal &= torch.equal(a, b) and torch.equal(la, lb)
        report["equal"] = equal
    Path(out, f"rank{rank}.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(_rank_main(*sys.argv[1:]))
