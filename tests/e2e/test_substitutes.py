"""``data.on_error=skip`` fills a bad file's slot with a substitute drawn from (seed, epoch,
position): batches keep their size, ranks yield equal counts, backends agree, and a
resumed epoch replays exactly; the bad file is still reported once and counted."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import CORNER
from helpers.identity import IDENTITY_CLASSES, ids

from dali_pipes import build_loader, compose_config
from dali_pipes.data.substitutes import substitute

N = sum(IDENTITY_CLASSES.values())
#: Corner files every decoder here rejects: a read/header failure, and one only a decoder
#: finds (DALI's blame search on the DALI backend).
BAD = [
    "empty_or_stub/jd__empty.jpg",
    "truncated/pillow__truncated_jpeg.jpg",
    "corrupt/jd__derive-huffman-codes-overflow.jpg",
]
BACKENDS = ["dali", "torch", "cache-ram"]


def cfg_for(root: Path, backend: str, *extra: str) -> Any:
    cache = backend == "cache-ram"
    return compose_config(
        [
            "data=folder",
            f"data.root={root}",
            f"backend={'torch' if cache else backend}",
            "backend.device=cpu",
            "data.batch_size=4",
            "data.on_error=skip",
            "augment.train.crop.size=32",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            *(["data.cache=ram"] if cache else []),
            *(["backend.num_workers=1"] if backend == "torch" else []),
            *extra,
        ]
    )


@pytest.fixture
def mixed(identity_tree: Path, tmp_path: Path) -> Path:
    if not CORNER.is_dir():
        pytest.skip(f"corner-case files not found at {CORNER}")
    corner = CORNER
    root = tmp_path / "mixed"
    shutil.copytree(identity_tree, root)
    for k, rel in enumerate(BAD):
        shutil.copy(corner / rel, root / list(IDENTITY_CLASSES)[k % 3] / f"zz_bad_{k}.jpg")
    return root


def epoch_of(loader: Any, epoch: int) -> list[tuple[list[int], list[int]]]:
    loader.set_epoch(epoch)
    return [(ids(x), y.tolist()) for x, y in loader]


def test_a_substitute_is_a_pure_function_of_seed_epoch_position_and_attempt() -> None:
    draws = [substitute(3, 1, p, a, 50) for p in range(40) for a in range(3)]
    assert draws == [substitute(3, 1, p, a, 50) for p in range(40) for a in range(3)]
    assert all(0 <= d < 50 for d in draws) and len(set(draws)) > 20
    assert draws != [substitute(4, 1, p, a, 50) for p in range(40) for a in range(3)]
    assert draws != [substitute(3, 2, p, a, 50) for p in range(40) for a in range(3)]


@pytest.mark.parametrize("split", ["train", "val"])
def test_skip_keeps_every_batch_full_and_the_backends_equal(mixed: Path, split: str) -> None:
    runs = {}
    for backend in BACKENDS:
        loader = build_loader(cfg_for(mixed, backend), split)
        runs[backend] = [epoch_of(loader, e) for e in (0, 1)]
        total = N + len(BAD)
        for batches in runs[backend]:
            sizes = [len(y) for _, y in batches]
            assert sizes == [4] * (total // 4) + ([total % 4] if total % 4 else [])
            assert loader.skipped == len(BAD)
        assert sorted(Path(p).name for p in loader.bad_files) == [
            f"zz_bad_{k}.jpg" for k in range(len(BAD))
        ]
        loader.close()
    assert runs["dali"] == runs["torch"] == runs["cache-ram"]
    # every good sample once, plus one substitute (a good sample) per bad file
    got = sorted(i for b in runs["torch"][0] for i in b[0])
    assert set(got) == set(range(N)) and len(got) == N + len(BAD)


@pytest.mark.parametrize("backend", BACKENDS)
def test_skip_gives_every_rank_the_same_count(mixed: Path, backend: str) -> None:
    counts = []
    for rank in (0, 1):
        loader = build_loader(cfg_for(mixed, backend), "val", rank=rank, world_size=2)
        batches = epoch_of(loader, 0)
        counts.append(([len(y) for _, y in batches], len(loader), len(loader.sampler)))
        loader.close()
    assert counts[0] == counts[1]
    assert sum(counts[0][0]) == counts[0][2] == (N + len(BAD) + 1) // 2


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_a_resumed_epoch_with_bad_files_replays_exactly(mixed: Path, backend: str) -> None:
    cfg = cfg_for(mixed, backend)
    loader = build_loader(cfg, "train")
    full = epoch_of(loader, 2)
    loader.set_epoch(2)
    it = iter(loader)
    head = [(ids(x), y.tolist()) for x, y in (next(it), next(it))]
    state = loader.state_dict()
    loader.close()
    again = build_loader(cfg, "train")
    again.load_state_dict(state)
    rest = [(ids(x), y.tolist()) for x, y in again]
    assert head + rest == full
    again.close()


def test_drop_keeps_the_old_shrinking_behaviour(mixed: Path) -> None:
    loader = build_loader(cfg_for(mixed, "torch", "data.on_error=drop"), "val")
    got = sorted(i for b, _ in epoch_of(loader, 0) for i in b)
    assert got == list(range(N)) and loader.skipped == len(BAD)
    loader.close()
