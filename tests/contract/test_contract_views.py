"""The batch contract for a split with views (``augment=dino``, scaled down): every backend
yields ``(views, labels)``, ``views`` a list of ``[N, 3, H, W]`` tensors in the preset's
order, each under the contract's rules (dtype, normalisation, channels_last, device), and
every guarantee holds per view: ``set_epoch``, resume mid-epoch, replay of a step, disjoint
DDP shards whose views are the single process's.

The tree has one image per class folder, so a label names its sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import IDENTITY_CLASSES

from dali_pipes import build_loader, compose_config
from dali_pipes.backends.base import Loader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.config.specs import loader_spec

N = sum(IDENTITY_CLASSES.values())
BATCH = 5
#: DINO with 32-pixel globals and 16-pixel locals, 3 local crops: the preset's structure
#: (bicubic crops, every op, solarisation on the second global) at a cost a test can pay.
SMALL_DINO = (
    "augment=dino",
    "augment.train.crop.size=32",
    "augment.train.views.local.crop.size=16",
    "augment.train.views.local.count=3",
    "augment.train.ops.gaussian_blur.kernel_size=5",
)
SIZES = [(32, 32)] * 2 + [(16, 16)] * 3
KINDS = ["torch", "dali-cpu", "dali-twin", "cache-ram", "synthetic"]


def loader(kind: str, tree: Path, *extra: str, rank: int = 0, world: int = 1) -> Loader:
    backend = {"cache-ram": "torch", "dali-twin": "dali"}.get(kind, kind.split("-")[0])
    overrides = [
        "data=folder",
        f"data.root={tree}",
        f"data.batch_size={BATCH}",
        *SMALL_DINO,
        f"backend={backend}",
        "backend.device=cpu",
        *(["backend.num_workers=0"] if backend == "torch" else []),
        *(["data.cache=ram"] if kind == "cache-ram" else []),
        *extra,
    ]
    cfg = compose_config(overrides)
    if kind == "dali-twin":
        return DaliLoader(loader_spec(cfg, "train", rank=rank, world_size=world), twin=True)
    return build_loader(cfg, "train", rank=rank, world_size=world)


def epoch(loader: Loader, number: int, start: int = 0) -> list[tuple[list[torch.Tensor], Any]]:
    loader.set_epoch(number, start_batch=start)
    return [(views, labels) for views, labels in loader]


def same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        torch.equal(la, lb) and all(torch.equal(x, y) for x, y in zip(va, vb, strict=True))
        for (va, la), (vb, lb) in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("kind", KINDS)
def test_every_backend_yields_a_list_of_views_under_the_batch_contract(
    kind: str, unique_tree: Path
) -> None:
    with loader(kind, unique_tree) as it:
        assert len(it) == -(-N // BATCH)
        batches = epoch(it, 0)
    assert len(batches) == len(it)
    for k, (views, labels) in enumerate(batches):
        size = BATCH if k < len(batches) - 1 else N - BATCH * (len(batches) - 1)
        assert isinstance(views, list) and len(views) == len(SIZES)
        for view, (h, w) in zip(views, SIZES, strict=True):
            assert view.shape == (size, 3, h, w) and view.dtype == torch.float32
            assert view.device.type == "cpu" and view.is_contiguous()
        assert labels.dtype == torch.int64 and labels.shape == (size,)
    if kind != "synthetic":  # normalised: ImageNet mean/std put values around zero
        values = torch.cat([v.flatten() for views, _ in batches for v in views])
        assert -2.2 < values.min() < -1.0 and 1.5 < values.max() < 2.7
        seen = torch.cat([labels for _, labels in batches])
        assert sorted(seen.tolist()) == list(range(N))


@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_each_view_follows_the_output_dtype_and_memory_format(kind: str, unique_tree: Path) -> None:
    with loader(kind, unique_tree, "augment.dtype=bfloat16", "augment.channels_last=true") as it:
        views, _ = next(iter(it))
    for view, (h, w) in zip(views, SIZES, strict=True):
        assert view.dtype == torch.bfloat16 and view.shape[-2:] == (h, w)
        assert view.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_set_epoch_resume_and_replay_give_the_same_views(kind: str, unique_tree: Path) -> None:
    with loader(kind, unique_tree) as it:
        first = epoch(it, 3)
        assert same(epoch(it, 3), first)  # set_epoch: a function of (seed, epoch)
        assert not same(epoch(it, 4), first)
        it.set_epoch(3)
        batches = iter(it)
        next(batches)
        next(batches)
        state = it.state_dict()  # two batches handed over
        del batches
    with loader(kind, unique_tree) as resumed:
        resumed.load_state_dict(state)
        assert same([(v, y) for v, y in resumed], first[2:])  # resume mid-epoch
    with loader(kind, unique_tree) as replay:
        assert same(epoch(replay, 3, start=1)[:1], first[1:2])  # replay of step 1


@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_ddp_shards_are_disjoint_and_each_samples_views_are_the_single_processs(
    kind: str, unique_tree: Path
) -> None:
    def by_sample(batches: list[Any]) -> dict[int, list[torch.Tensor]]:
        return {
            int(label): [view[j] for view in views]
            for views, labels in batches
            for j, label in enumerate(labels)
        }

    with loader(kind, unique_tree) as whole:
        alone = by_sample(epoch(whole, 1))
    shards = []
    for rank in range(2):
        with loader(kind, unique_tree, rank=rank, world=2) as it:
            shards.append(epoch(it, 1))
    parts = [by_sample(shard) for shard in shards]
    # DistributedSampler pads 17 samples to 18: one sample twice, on the two ranks.
    assert len(set(parts[0]) & set(parts[1])) <= 1 and set(parts[0]) | set(parts[1]) == set(alone)
    assert sum(len(labels) for shard in shards for _, labels in shard) == 18
    for part in parts:
        for sample, views in part.items():
            assert all(torch.equal(a, b) for a, b in zip(views, alone[sample], strict=True))
