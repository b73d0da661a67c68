"""``sampling=weighted|class_balanced`` through the loaders: torch's draws on every backend,
a repeat of a sample augmented afresh, epochs resumed part-way, the order's kind checked
on load, and what cannot be sampled that way refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import IDENTITY_CLASSES
from helpers.identity import SIZE, N, epoch, ids, levels
from helpers.shards import pack
from torch.utils.data import WeightedRandomSampler

from dali_pipes import build_loader, compose_config
from dali_pipes.errors import ConfigError
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH, figures

SEED = 3


def loader(root: Path, *extra: str, backend: str = "torch", seed: int = SEED, **kw: Any) -> Any:
    overrides = [
        "data=folder",
        f"data.root={root}",
        "data.batch_size=4",
        f"seed={seed}",
        f"augment.train.crop.size={SIZE}",
        f"backend={backend}",
        "backend.device=cpu",
        *(["backend.num_workers=0"] if backend == "torch" else []),
        *extra,
    ]
    return build_loader(compose_config(overrides), "train", **kw)


@pytest.fixture
def weights(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A weight per identity sample (some 0), one per line."""
    w = np.random.default_rng(1).integers(0, 5, N).astype(float)
    path = tmp_path / "weights.txt"
    np.savetxt(path, w)
    return path, w


@pytest.mark.parametrize("replacement", [True, False])
def test_a_weighted_epoch_reads_torchs_weighted_random_sampler_draws(
    identity_tree: Path, weights: tuple[Path, np.ndarray], replacement: bool
) -> None:
    path, w = weights
    draws = 24 if replacement else int(np.count_nonzero(w))
    with loader(
        identity_tree,
        "sampling=weighted",
        f"sampling.weights={path}",
        f"sampling.num_samples={draws}",
        f"sampling.replacement={replacement}",
    ) as weighted:
        assert len(weighted) == -(-draws // 4)
        for number in (0, 2):
            g = torch.Generator()
            g.manual_seed(SEED + number)
            expected = list(WeightedRandomSampler(w.tolist(), draws, replacement, generator=g))
            assert ids(epoch(weighted, number)[0]) == expected


def test_class_balanced_sampling_draws_each_class_equally_often(identity_tree: Path) -> None:
    """Over 40 epochs of 17 draws (680), each class's share within 0.06 of a third (its
    binomial standard deviation is 0.018)."""
    with loader(identity_tree, "sampling=class_balanced", backend="synthetic") as balanced:
        labels = torch.cat([epoch(balanced, n)[1] for n in range(40)])
    share = torch.bincount(labels, minlength=3).double() / len(labels)
    assert len(labels) == 40 * N and torch.all((share - 1 / 3).abs() < 0.06), share
    assert len(IDENTITY_CLASSES) == 3


def test_each_repeat_of_a_sample_is_augmented_afresh_alike_on_every_backend(
    real_photos: Path, tmp_path: Path
) -> None:
    """One photo of weight 1, the rest 0: a batch of four draws of it, four different
    crops; the cache's batch is the torch backend's, DALI's within its parity bound."""
    path = tmp_path / "one.txt"
    count = sum(p.suffix in (".jpg", ".jpeg") for p in real_photos.glob("*/*"))
    np.savetxt(path, np.eye(count)[4])
    common = [
        "sampling=weighted",
        f"sampling.weights={path}",
        "sampling.num_samples=4",
        "augment.train.crop.size=64",
    ]
    with loader(real_photos, *common) as ref:
        images, labels = epoch(ref, 1)
    assert len(set(labels.tolist())) == 1
    assert all(not torch.equal(images[i], images[j]) for i in range(4) for j in range(i))
    with loader(real_photos, *common, "data.cache=ram") as cache:
        assert torch.equal(epoch(cache, 1)[0], images)
    with loader(real_photos, *common, backend="dali") as dali:
        assert DALI_CPU_VS_TORCH.admits(figures(levels(epoch(dali, 1)[0]), levels(images)))


@pytest.mark.parametrize("backend", ["torch", "dali"])
def test_a_weighted_epoch_resumed_part_way_gives_the_rest_of_its_batches(
    identity_tree: Path, backend: str
) -> None:
    common = ["sampling=class_balanced", "sampling.num_samples=30"]
    with loader(identity_tree, *common, backend=backend) as first:
        first.set_epoch(2)
        whole = [ids(images) for images, _ in first]
        first.set_epoch(2)
        for k, _ in enumerate(first):
            if k == 2:
                break
        state = first.state_dict()
    with loader(identity_tree, *common, backend=backend) as again:
        again.load_state_dict(state)
        rest = [ids(images) for images, _ in again]
    assert rest == whole[3:]


def test_ranks_read_equal_disjoint_shares_of_a_class_balanced_epoch(identity_tree: Path) -> None:
    common = ["sampling=class_balanced", "sampling.num_samples=30"]
    with loader(identity_tree, *common) as whole:
        order = ids(epoch(whole, 1)[0])
    shares = []
    for rank in range(3):
        with loader(identity_tree, *common, rank=rank, world_size=3) as part:
            shares.append(ids(epoch(part, 1)[0]))
    assert len({len(s) for s in shares}) == 1
    assert [s[k] for k in range(10) for s in shares] == order


def test_a_state_saved_under_one_sampling_is_refused_by_another(identity_tree: Path) -> None:
    with loader(identity_tree, "sampling=class_balanced") as balanced:
        state = balanced.state_dict()
    with loader(identity_tree) as plain, pytest.raises(ConfigError, match=r"sampler="):
        plain.load_state_dict(state)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["sampling.num_samples=8"], r"sampling=default does not"),
        (["sampling=weighted"], r"sampling\.weights"),
        (["sampling=weighted", "sampling.weights=/nonexistent/w.txt"], r"cannot read it"),
        (["sampling=class_balanced", "sampling.power=-1"], r"sampling\.power=-1"),
    ],
)
def test_a_sampling_that_cannot_be_made_is_one_line(
    identity_tree: Path, extra: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        loader(identity_tree, *extra)


def test_drawn_sampling_of_a_dataset_read_in_blocks_is_refused(
    identity_tree: Path, tmp_path: Path
) -> None:
    pack(identity_tree, tmp_path, "pack.shard_size_mb=0.004")
    cfg = compose_config(
        ["data=shards", f"data.root={tmp_path}", "sampling=class_balanced", "backend.device=cpu"]
    )
    with pytest.raises(ConfigError, match=r"read in blocks"):
        build_loader(cfg, "train")


def test_a_repeated_augmentation_epoch_reads_timms_repeat_aug_sampler_order(
    identity_tree: Path,
) -> None:
    from timm.data.distributed_sampler import RepeatAugSampler

    with loader(identity_tree, "sampling=repeated", seed=0) as repeated:
        theirs = RepeatAugSampler(list(range(N)), 1, 0, num_repeats=3, selected_round=0)
        theirs.set_epoch(4)
        assert ids(epoch(repeated, 4)[0]) == list(theirs)


def test_dali_iterator_takes_a_weighted_random_sampler_as_it_is(
    identity_tree: Path, weights: tuple[Path, np.ndarray]
) -> None:
    from dali_pipes import DALIIterator

    _, w = weights
    given = WeightedRandomSampler(w.tolist(), 20, replacement=True)
    with DALIIterator(
        str(identity_tree), batch_size=4, device="cpu", image_size=SIZE, seed=SEED, sampler=given
    ) as it:
        assert len(it) == 5 and it.state_dict()["sampler"] == "weighted"
        g = torch.Generator()
        g.manual_seed(SEED + 1)
        expected = list(WeightedRandomSampler(w.tolist(), 20, replacement=True, generator=g))
        assert ids(epoch(it, 1)[0]) == expected


def test_dali_iterator_refuses_a_sampler_it_cannot_read_an_order_from(identity_tree: Path) -> None:
    from torch.utils.data import SequentialSampler

    from dali_pipes import DALIIterator

    with pytest.raises(ConfigError, match=r"sampler=SequentialSampler is not one"):
        DALIIterator(str(identity_tree), device="cpu", sampler=SequentialSampler(range(3)))


def _reversed_order(source: Any, sampling: Any, spec: Any) -> Any:
    """A user's sampler: every sample once, last first."""
    from dali_pipes.data.sampling import RankSampler

    class Reversed(RankSampler):
        def order(self, epoch: int) -> np.ndarray:
            return np.arange(self.num_items)[::-1].copy()

    return Reversed(len(source), sampling)


def test_a_registered_sampler_is_chosen_by_its_name(identity_tree: Path) -> None:
    from dali_pipes import register_sampler
    from dali_pipes.data.samplers import SAMPLERS

    with SAMPLERS.restored():
        register_sampler("reversed", _reversed_order)
        with loader(identity_tree, "sampling.name=reversed") as mine:
            assert ids(epoch(mine, 0)[0]) == list(range(N))[::-1]
            assert mine.state_dict()["sampler"] == "reversed"
    with pytest.raises(ConfigError, match=r"sampling='reversed' is not a sampler"):
        loader(identity_tree, "sampling.name=reversed")
