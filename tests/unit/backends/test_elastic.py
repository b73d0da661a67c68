"""Loader state: exact mid-epoch resume, and elastic resume onto another world size.

The sampler tests check the arithmetic over many sizes; the loader tests check real
batches: every image of the identity tree is a flat colour naming its sample index (the
default crop and flip keep the colour), so the images themselves say which samples each
rank read.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers.batches import batches
from helpers.identity import SIZE, N, ids
from helpers.shards import pack

from dali_pipes import build_loader, compose_config
from dali_pipes.data.sampling import RankSampler, StreamSampler
from dali_pipes.data.shards import ShardLayout
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.errors import ConfigError

BACKENDS = ["torch", "dali-cpu"]
EPOCH, SEED = 3, 5

# --------------------------------------------------------------------------- samplers


def samplers(n: int, world: int, drop_last: bool) -> list[RankSampler]:
    return [
        RankSampler(n, SamplingSpec(seed=SEED, drop_last=drop_last, rank=r, world_size=world))
        for r in range(world)
    ]


def run(
    n: int, drop_last: bool, start: int, world: int, batch: int, k: int | None
) -> tuple[list[int], int | None]:
    """``k`` batches (None: the rest of the epoch) on every rank of ``world`` from
    ``start``: the samples read, and the ``start`` after them (None: the epoch is over)."""
    per_rank = [s.batches(EPOCH, batch, start) for s in samplers(n, world, drop_last)]
    assert len({len(b) for b in per_rank}) == 1, "every rank yields the same number of batches"
    total = len(per_rank[0])
    k = total if k is None else min(k, total)
    reads = [int(i) for batches in per_rank for b in batches[:k] for i in b]
    return reads, (start + k * batch * world if k < total else None)


def expected_tail(n: int, drop_last: bool, start: int, world: int, batch: int) -> Counter[int]:
    """What finishing an epoch from ``start`` must read: DistributedSampler's rule on the
    samples left (padding by carrying on from the head of the epoch order)."""
    order = samplers(n, 1, False)[0].order(EPOCH)
    rest = order[start:]
    if drop_last:
        per = len(rest) // world
        return Counter(int(i) for i in rest[: per // batch * batch * world])
    pad = -len(rest) % world
    return Counter(int(i) for i in np.concatenate([rest, np.resize(order, pad)]))


PHASES = [  # (world size, batch size, batches per rank) of each run before the last
    [(2, 2, 1)],
    [(2, 4, 2)],
    [(4, 1, 3)],
    [(3, 2, 1), (5, 1, 1)],  # elastic twice within one epoch
    [(2, 1, 2), (2, 1, 1)],
]


@pytest.mark.parametrize("n", [1, 5, 17, 64])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("phases", PHASES)
@pytest.mark.parametrize("final", [(1, 3), (2, 2), (3, 1), (3, 4), (8, 2)])
def test_resuming_on_any_world_and_batch_size_reads_each_remaining_sample_once(
    n: int, drop_last: bool, phases: list[tuple[int, int, int]], final: tuple[int, int]
) -> None:
    order = samplers(n, 1, False)[0].order(EPOCH)
    start: int | None = 0
    reads: list[int] = []
    for world, batch, k in phases:
        assert start is not None
        part, after = run(n, drop_last, start, world, batch, k)
        if after is None:  # this run already finished the epoch: nothing left to resume
            return
        # The consumed samples are exactly the next stretch of the epoch order.
        assert Counter(part) == Counter(int(i) for i in order[start:after])
        reads, start = reads + part, after
    assert start is not None and start < n, "mid-epoch, the position is inside the order"
    rest, after = run(n, drop_last, start, *final, None)
    assert after is None
    assert Counter(rest) == expected_tail(n, drop_last, start, *final)
    everything = Counter(reads + rest)
    if drop_last:
        assert max(everything.values()) == 1, "nothing is read twice"
        world, batch = final
        assert n - len(reads + rest) < world * (batch + 1), "only the usual drop"
    else:
        assert set(everything) == set(range(n)), "every sample is read"
        assert sum(everything.values()) - n == -(n - start) % final[0], "plus only padding"


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize(("world", "batch"), [(1, 4), (2, 2), (3, 1), (4, 3)])
def test_resuming_on_the_same_world_and_batch_size_continues_the_epoch_exactly(
    drop_last: bool, world: int, batch: int
) -> None:
    for n in (5, 17, 64):
        for s in samplers(n, world, drop_last):
            whole = [b.tolist() for b in s.batches(EPOCH, batch)]
            for k in range(len(whole) + 1):
                resumed = [b.tolist() for b in s.batches(EPOCH, batch, k * batch * world)]
                assert resumed == whole[k:], "padding included"


def test_a_second_resume_on_the_same_world_continues_the_elastic_one_exactly() -> None:
    """2 ranks -> 3 ranks (elastic) -> 3 ranks again: the last resume changes nothing."""
    for n in (17, 64):
        for drop_last in (False, True):
            start = 2 * 2 * 2  # two batches of 2 on 2 ranks
            for s in samplers(n, 3, drop_last):
                elastic = [b.tolist() for b in s.batches(EPOCH, 2, start)]
                again = [b.tolist() for b in s.batches(EPOCH, 2, start + 2 * 3)]
                assert again == elastic[1:]


def layout(n: int, per_shard: int, buffer: int) -> ShardLayout:
    shards = np.arange(n) // per_shard
    tars = tuple(f"s{k}.tar" for k in range(int(shards[-1]) + 1))
    zeros = np.zeros(n, np.int64)
    return ShardLayout(tars, shards.astype(np.int64), zeros, zeros, shuffle_buffer=buffer)


def test_a_packed_order_resumes_exactly_on_its_world_size_and_refuses_another() -> None:
    lay = layout(40, 6, 4)
    for world, batch in ((1, 4), (2, 3), (3, 2)):
        for rank in range(world):
            s = StreamSampler(40, SamplingSpec(seed=SEED, rank=rank, world_size=world), lay)
            whole = [b.tolist() for b in s.batches(EPOCH, batch)]
            for k in range(len(whole) + 1):
                start = k * batch * world
                if k < len(whole):  # a saved state is mid-epoch
                    s.check_resume(start, world, batch)
                assert [b.tolist() for b in s.batches(EPOCH, batch, start)] == whole[k:]
    s = StreamSampler(40, SamplingSpec(seed=SEED, rank=0, world_size=3), lay)
    s.check_resume(0, 2, 2)  # the start of an epoch is the same on any world size
    with pytest.raises(ConfigError, match=r"^loader state saved on world_size=2 cannot .*=3:"):
        s.check_resume(8, 2, 2)
    with pytest.raises(ConfigError, match=r"samples_seen=12 is 4 samples per rank, not whole"):
        s.check_resume(12, 3, 3)


# --------------------------------------------------------------------------- loaders


def make(kind: str, root: Path, *, rank: int = 0, world_size: int = 1, **opts: Any) -> Any:
    """A training loader over ``root`` (``opts``: batch_size, seed, drop_last, augment)."""
    backend, _, _ = kind.partition("-")
    overrides = [
        "data=folder",
        f"data.root={root}",
        f"data.batch_size={opts.get('batch_size', 2)}",
        f"data.drop_last={opts.get('drop_last', False)}",
        f"seed={opts.get('seed', SEED)}",
        f"backend={backend}",
        "backend.device=cpu",
        f"augment={opts.get('augment', 'imagenet')}",
        f"augment.train.crop.size={SIZE}",
        *(["backend.num_workers=0"] if backend == "torch" else []),
    ]
    return build_loader(compose_config(overrides), "train", rank=rank, world_size=world_size)


def finish(kind: str, root: Path, state: dict[str, Any], world: int, **opts: Any) -> list[int]:
    """Fresh loaders on ``world`` ranks, loaded with ``state``, run to the end of the epoch."""
    reads = []
    for rank in range(world):
        with make(kind, root, rank=rank, world_size=world, **opts) as loader:
            loader.load_state_dict(state)
            reads += [i for images, _ in batches(loader, None) for i in ids(images)]
    return reads


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_epoch_saved_on_2_ranks_finishes_on_1_or_3_reading_each_sample_once(
    kind: str, identity_tree: Path
) -> None:
    ranks = [make(kind, identity_tree, rank=r, world_size=2) for r in range(2)]
    for loader in ranks:
        loader.set_epoch(EPOCH)
    # Two batches of 2 on each rank: the first 8 samples of the epoch order.
    seen = [i for loader in ranks for images, _ in batches(loader, 2) for i in ids(images)]
    states = [loader.state_dict() for loader in ranks]
    for loader in ranks:
        loader.close()
    assert states[0] == states[1], "every rank saves the same state"
    state = states[0]
    assert (state["epoch"], state["samples_seen"], state["world_size"]) == (EPOCH, 8, 2)
    assert len(seen) == len(set(seen)) == 8

    for world in (1, 3):
        rest = finish(kind, identity_tree, state, world)
        counts = Counter(seen + rest)
        assert set(counts) == set(range(N)), f"world {world}: a sample was never read"
        assert sum(counts.values()) == N + (-(N - 8) % world), f"world {world}: extra reads"

    # Elastic twice in one epoch: 2 ranks -> 3 ranks for one batch -> 1 rank to the end.
    three = [make(kind, identity_tree, rank=r, world_size=3) for r in range(3)]
    for loader in three:
        loader.load_state_dict(state)
    seen += [i for loader in three for images, _ in batches(loader, 1) for i in ids(images)]
    state = three[0].state_dict()
    for loader in three:
        loader.close()
    assert state["samples_seen"] == 8 + 3 * 2 and state["world_size"] == 3
    counts = Counter(seen + finish(kind, identity_tree, state, 1))
    assert set(counts) == set(range(N)) and sum(counts.values()) == N


@pytest.mark.parametrize(
    ("kind", "augment"), [("torch", "imagenet"), ("dali-cpu", "imagenet"), ("torch", "deit")]
)
def test_a_resume_on_the_same_world_size_gives_the_uninterrupted_batches_exactly(
    kind: str, augment: str, identity_tree: Path
) -> None:
    """Images and labels (with ``deit``: mixed images and soft targets) equal bit for bit."""
    with make(kind, identity_tree, rank=1, world_size=2, augment=augment) as whole:
        whole.set_epoch(EPOCH)
        expected = batches(whole, None)
    with make(kind, identity_tree, rank=1, world_size=2, augment=augment) as first:
        first.set_epoch(EPOCH)
        batches(first, 2)
        state = first.state_dict()
    with make(kind, identity_tree, rank=1, world_size=2, augment=augment) as resumed:
        resumed.load_state_dict(state)
        assert resumed.start_batch == 2
        got = batches(resumed, None)
    assert len(got) == len(expected) - 2
    for (a, la), (b, lb) in zip(expected[2:], got, strict=True):
        assert torch.equal(a, b) and torch.equal(la, lb)


def test_the_state_follows_the_batches_handed_over(identity_tree: Path) -> None:
    with make("torch", identity_tree, rank=0, world_size=2, batch_size=3) as loader:

        def position() -> tuple[int, int]:
            state = loader.state_dict()
            return state["epoch"], state["samples_seen"]

        assert position() == (0, 0), "a new loader starts at epoch 0"
        loader.set_epoch(4)
        assert position() == (4, 0)
        loader.set_epoch(4, start_batch=2)
        assert position() == (4, 2 * 3 * 2)
        loader.set_epoch(4, start_batch=len(loader))
        assert position() == (5, 0), "nothing left of epoch 4: the state is epoch 5"

        loader.set_epoch(4)
        it = iter(loader)
        assert position() == (4, 0), "iter alone consumes nothing"
        next(it)
        assert position() == (4, 6), "a batch counts once handed over, on all ranks"
        for _ in range(len(loader) - 2):
            next(it)
        assert position() == (4, 6 * (len(loader) - 1))
        next(it)
        assert position() == (5, 0), "the last batch handed over: the next epoch"
        assert next(it, None) is None and position() == (5, 0)

        stale = iter(loader)  # the next iter runs epoch 5
        next(stale)
        assert position() == (5, 6)
        iter(loader)  # epoch 6: the state follows the latest iter
        assert position() == (6, 0)
        next(stale)
        assert position() == (6, 0), "an earlier iterator no longer counts"
        loader.set_epoch(7)
        assert position() == (7, 0)


def test_the_state_is_plain_data_that_loads_with_weights_only(identity_tree: Path) -> None:
    with make("torch", identity_tree) as loader:
        batches(loader, 1)
        state = loader.state_dict()
    buffer = io.BytesIO()
    torch.save({"loader": state}, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True)["loader"] == state
    assert all(isinstance(v, int | str | bool) for v in state.values())
    expected = {"version", "epoch", "samples_seen", "seed", "world_size", "batch_size"}
    assert expected | {"num_items"} <= set(state)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": 9}, r"^loader state seed=9 differs from this loader's seed=5: .*seed$"),
        ({"num_items": 20}, r"^loader state num_items=20 differs from this loader's num_items=17"),
        ({"shuffle": False}, r"^loader state shuffle=False differs"),
        ({"sampler": "shards"}, r"^loader state sampler='shards' differs .*data format$"),
        ({"version": 99}, r"^loader state version=99 is not supported"),
        ({"samples_seen": 18}, r"^loader state samples_seen=18 is invalid: .*num_items=17\]$"),
        ({"samples_seen": "8"}, r"^loader state samples_seen='8' is invalid: must be an integer$"),
        ({"epoch": -1}, r"^loader state epoch=-1 is invalid: must be >= 0$"),
        ({"world_size": None}, r"^loader state has no 'world_size': pass the dict"),
    ],
)
def test_a_state_that_does_not_fit_the_loader_is_refused_in_one_line(
    identity_tree: Path, change: dict[str, Any], message: str
) -> None:
    with make("torch", identity_tree) as loader:
        state = loader.state_dict() | change
        state = {k: v for k, v in state.items() if v is not None}
        before = loader.state_dict()
        with pytest.raises(ConfigError, match=message) as err:
            loader.load_state_dict(state)
        assert "\n" not in str(err.value)
        assert loader.state_dict() == before, "a refused state changes nothing"


@pytest.fixture(scope="module")
def packed(identity_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packed")
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    return out


def shard_loader(kind: str, root: Path, rank: int, world_size: int) -> Any:
    backend = kind.partition("-")[0]
    overrides = [
        "data=shards",
        f"data.root={root}",
        "data.shuffle_buffer=4",
        "data.batch_size=2",
        f"seed={SEED}",
        f"backend={backend}",
        "backend.device=cpu",
        f"augment.train.crop.size={SIZE}",
        *(["backend.num_workers=0"] if backend == "torch" else []),
    ]
    return build_loader(compose_config(overrides), "train", rank=rank, world_size=world_size)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_packed_epoch_resumes_exactly_on_its_world_size_and_refuses_another(
    kind: str, packed: Path
) -> None:
    with shard_loader(kind, packed, 1, 2) as whole:
        whole.set_epoch(EPOCH)
        expected = [ids(images) for images, _ in batches(whole, None)]
    with shard_loader(kind, packed, 1, 2) as first:
        first.set_epoch(EPOCH)
        batches(first, 3)
        state = first.state_dict()
    with shard_loader(kind, packed, 1, 2) as resumed:
        resumed.load_state_dict(state)
        assert [ids(images) for images, _ in batches(resumed, None)] == expected[3:]
    with (
        shard_loader(kind, packed, 0, 3) as other,
        pytest.raises(ConfigError, match=r"world_size=2 cannot resume a packed dataset"),
    ):
        other.load_state_dict(state)
