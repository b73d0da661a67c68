"""Mixing several sources (``data=mix``): each epoch's samples per source as the weights say,
every sample of a source shown once before any again, ranks' equal disjoint shares, the
mix's labels, and what cannot be mixed refused in one line."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import IDENTITY_CLASSES, colour_id
from helpers.shards import pack
from torchvision.io import decode_jpeg

from dali_pipes.data.mix import PART_SHIFT, MixedSource, mix_sources, open_mix, part_of
from dali_pipes.data.mix_order import MixSampler, PartShare, epoch_shares
from dali_pipes.data.sources import FolderSource, SyntheticSource, discover_folder
from dali_pipes.data.specs import FolderData, MixData, SamplingSpec
from dali_pipes.errors import ConfigError

# Three parts: one down-sampled (12 samples, 4 an epoch), one up-sampled (5 samples, 12 an
# epoch), one left out of training (weight 0).
PARTS = (PartShare("a", 12, 4), PartShare("b", 5, 12), PartShare("c", 3, 0))


def sampler(rank: int = 0, world_size: int = 1, seed: int = 5, **kw: Any) -> MixSampler:
    spec = SamplingSpec(seed=seed, rank=rank, world_size=world_size, **kw)
    return MixSampler(20, spec, PARTS)


def part_of_index(index: np.ndarray) -> np.ndarray:
    return np.searchsorted([0, 12, 17, 20], index, side="right") - 1


def folder(root: str, classes: tuple[str, ...], labels: list[int]) -> FolderSource:
    files = tuple(f"{root}/{classes[k]}/{i}.jpg" for i, k in enumerate(labels))
    return FolderSource(root, files, np.asarray(labels, np.int64), classes)


def test_an_epochs_shares_follow_the_weights_and_sum_to_the_epoch() -> None:
    assert epoch_shares([10, 10, 10], [3, 1, 0], 40) == [30, 10, 0]
    assert epoch_shares([7, 5], None, 12) == [7, 5], "no weights: each source's size"
    shares = epoch_shares([1, 1, 1], [1, 1, 1], 100)
    assert sum(shares) == 100 and sorted(shares) == [33, 33, 34]
    with pytest.raises(ConfigError, match="all 0"):
        epoch_shares([1, 2], [0, 0], 3)
    with pytest.raises(ConfigError, match=r"weights \[1.0, -1.0\] are invalid"):
        epoch_shares([1, 2], [1, -1], 3)
    with pytest.raises(ConfigError, match="every dataset of the mix is empty"):
        epoch_shares([0, 0], None, 3)
    with pytest.raises(ConfigError, match="epoch_size=0 is invalid"):
        epoch_shares([1, 2], None, 0)


def test_every_epoch_reads_each_sources_share_exactly() -> None:
    mix = sampler()
    assert mix.epoch_length == 16 and mix.kind == "mix 4/12+12/5+0/3"
    for epoch in range(50):
        counts = Counter(part_of_index(mix.order(epoch)).tolist())
        assert counts == {0: 4, 1: 12}, epoch


def test_a_down_sampled_source_shows_every_sample_once_before_any_again() -> None:
    """Part a (12 samples, 4 an epoch): epochs 3k..3k+2 show each of its samples once."""
    mix = sampler()
    for cycle in range(4):
        seen = np.concatenate([mix.stream(0, 3 * cycle + e) for e in range(3)])
        assert sorted(seen.tolist()) == list(range(12)), cycle


def test_an_up_sampled_source_shows_each_sample_as_often_as_the_others() -> None:
    """Part b (5 samples, 12 an epoch): each sample 1 to 3 times an epoch (its whole
    cycles, and the ends of the cycles the epoch starts and stops in), and over 5 epochs
    (60 draws, 12 cycles) exactly 12 times."""
    mix = sampler()
    total: Counter[int] = Counter()
    for epoch in range(5):
        counts = Counter(mix.stream(1, epoch).tolist())
        assert set(counts.values()) <= {1, 2, 3} and sum(counts.values()) == 12
        total += counts
    assert total == dict.fromkeys(range(5), 12)


def test_a_repeat_within_an_epoch_is_numbered_so_it_draws_anew() -> None:
    mix = sampler()
    index, repeats = mix.indices(0), mix.repeats(0)
    assert len(set(zip(index.tolist(), repeats.tolist(), strict=True))) == len(index)
    assert repeats.max() >= 2, "part b's 5 samples come 2-3 times each"


def test_the_same_epoch_gives_the_same_order_and_another_epoch_another() -> None:
    assert np.array_equal(sampler().order(3), sampler().order(3))
    assert not np.array_equal(sampler().order(3), sampler().order(4))
    assert not np.array_equal(sampler(seed=5).order(3), sampler(seed=6).order(3))


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_read_equal_disjoint_shares_of_a_mix_epoch(world_size: int) -> None:
    ranks = [sampler(rank, world_size) for rank in range(world_size)]
    lengths = {len(r.indices(2)) for r in ranks}
    assert lengths == {-(-16 // world_size)}
    slots = np.concatenate([r.positions() for r in ranks])
    assert sorted(slots.tolist()) == list(range(len(slots))), "each slot on one rank"
    padded = np.resize(ranks[0].order(2), len(slots))
    for r in ranks:
        assert np.array_equal(r.indices(2), padded[r.positions()])


def test_a_mix_epoch_resumed_part_way_continues_every_source_where_it_was() -> None:
    whole = sampler(0, 2).indices(4)
    for start in (2, 6, 10):
        assert np.array_equal(sampler(0, 2).indices(4, start), whole[start // 2 :])
    # on another world size the rest is dealt out again, each remaining sample once
    rest = np.concatenate([sampler(r, 3).indices(4, 6)[: (16 - 6) // 3] for r in range(3)])
    assert sorted(rest.tolist()) == sorted(sampler().order(4)[6:15].tolist())


def test_without_shuffle_each_source_is_read_in_its_order() -> None:
    mix = sampler(shuffle=False)
    assert mix.order(0).tolist() == [0, 1, 2, 3, *(12 + np.arange(12) % 5)]
    assert mix.order(1)[:4].tolist() == [4, 5, 6, 7]


def test_the_first_source_draws_as_it_does_alone_and_no_two_sources_share_draws() -> None:
    a = folder("/a", ("x", "y"), [0, 0, 1])
    b = folder("/b", ("x", "z"), [0, 1])
    mix = mix_sources([a, b], ["0", "1"], None)
    ids = mix.identity(np.arange(5))
    assert ids[:3].tolist() == [0, 1, 2]
    assert ids[3:].tolist() == [(1 << PART_SHIFT) + 0, (1 << PART_SHIFT) + 1]
    assert [mix.name(i) for i in (2, 3)] == ["/a/y/2.jpg", "/b/x/0.jpg"]


def test_labels_kept_apart_follow_the_classes_of_the_sources_before() -> None:
    a = folder("/a", ("x", "y"), [0, 1, 1])
    b = folder("/b", ("x", "z"), [1, 0])
    mix = mix_sources([a, b], ["a", "b"], None)
    assert mix.classes == ("a/x", "a/y", "b/x", "b/z")
    assert mix.labels.tolist() == [0, 1, 1, 3, 2]


def test_shared_labels_match_classes_by_name_in_sorted_order() -> None:
    a = folder("/a", ("x", "y"), [0, 1, 1])
    b = folder("/b", ("w", "x"), [1, 0])
    mix = mix_sources([a, b], ["a", "b"], None, "shared")
    assert mix.classes == ("w", "x", "y")
    assert mix.labels.tolist() == [1, 2, 2, 1, 0]


def test_labels_given_as_a_list_map_each_source_onto_it() -> None:
    a = folder("/a", ("x", "y"), [0, 1])
    b = folder("/b", ("x",), [0])
    mix = mix_sources([a, b], ["a", "b"], None, ["y", "x", "unused"])
    assert mix.classes == ("y", "x", "unused") and mix.labels.tolist() == [1, 0, 1]
    with pytest.raises(ConfigError, match=r"class 'y' of source a is not in the class list"):
        mix_sources([a, b], ["a", "b"], None, ["x"])


def test_the_validation_split_reads_every_sample_once() -> None:
    a, b = folder("/a", ("x",), [0, 0]), folder("/b", ("x",), [0])
    assert mix_sources([a, b], ["a", "b"], [1, 9], train=False).proportions() is None
    assert mix_sources([a, b], ["a", "b"], [1, 9]).proportions() == (
        PartShare("a", 2, 0),
        PartShare("b", 1, 3),
    )


def test_a_mix_reads_each_sample_from_its_source_in_the_batchs_order(
    identity_parts: tuple[Path, Path],
) -> None:
    """The identity images split into two folders (ant and bee; cat): mix index k is the
    identity tree's sample k."""
    mix = mix_sources([discover_folder(p) for p in identity_parts], ["0", "1"], None)
    assert len(mix) == sum(IDENTITY_CLASSES.values())
    order = [16, 0, 12, 11, 3]
    blobs = mix.read(order)
    colours = [decode_jpeg(torch.from_numpy(np.asarray(b))).float().mean((1, 2)) for b in blobs]
    assert [colour_id(c.numpy()) for c in colours] == order
    assert mix.local_paths() is not None and len(mix.local_paths() or ()) == len(mix)


def test_a_source_that_is_not_a_list_entry_of_a_data_kind_is_one_line() -> None:
    mix = MixData(sources=({"name": "folder", "root": "/x"},))
    cases = [
        ("folder", "give a mapping with name"),
        ({"root": "/x"}, "give a mapping with name"),
        ({"name": "nope"}, "data='nope' is unknown"),
        ({"name": "mix", "sources": []}, "a mix inside a mix"),
        ({"name": "folder", "rot": "/x"}, r"data.sources\[0\].rot is not a key of data=folder"),
        ({"name": "folder", "batch_size": 4}, r"set data.batch_size instead"),
        ({"name": "folder", "on_error": "skip"}, r"set data.on_error instead"),
        ({"name": "folder", "weight": -1}, r"weight=-1 is invalid"),
        ({"name": "folder", "weight": "x"}, r"weight='x' is invalid"),
        ({"name": "zip", "root": "/x.zip", "max_pixels": 0}, r"set data.max_pixels instead"),
    ]
    for entry, message in cases:
        with pytest.raises(ConfigError, match=message) as err:
            part_of(entry, 0, mix)
        assert "\n" not in str(err.value)


def test_a_source_takes_the_mixs_bad_file_settings() -> None:
    mix = MixData(sources=({},), on_error="skip", read_timeout=7.0, max_pixels=99)
    part = part_of({"name": "folder", "root": "/x", "weight": 2, "tag": "mine"}, 0, mix)
    assert isinstance(part.data, FolderData) and part.tag == "mine" and part.weight == 2.0
    assert (part.data.on_error, part.data.read_timeout, part.data.max_pixels) == ("skip", 7.0, 99)


def test_a_mix_is_refused_without_sources_or_with_a_bad_epoch_size_or_labels() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "list at least one dataset"),
        ({"sources": [{}], "epoch_size": 0}, "data.epoch_size=0"),
        ({"sources": [{}], "labels": "merge"}, "choose separate or shared"),
        ({"sources": [{}], "labels": ["a", "a"]}, "each name once"),
    ]
    for keys, message in cases:
        with pytest.raises(ConfigError, match=message):
            MixData(**keys)


def test_sources_a_mix_cannot_read_are_refused_in_one_line(tmp_path: Path) -> None:
    a = folder("/a", ("x",), [0])
    with pytest.raises(ConfigError, match="has no images to read"):
        mix_sources([a, SyntheticSource(4, 2)], ["0", "1"], None)

    class Boxes:
        task, has_masks, root = "detection", False, "/coco"
        classes, labels = ("x",), np.zeros(1, np.int64)

        def __len__(self) -> int:
            return 1

        def read(self, indices: Any) -> list[Any]:
            return []

        def identity(self, indices: Any) -> np.ndarray:
            return np.zeros(0, np.int64)

        def name(self, index: int) -> str:
            return ""

        def targets(self, index: int) -> Any:
            return None

    with pytest.raises(ConfigError, match="has detection targets, which a mix does not carry"):
        mix_sources([a, Boxes()], ["0", "1"], None)
    with pytest.raises(ConfigError, match="two datasets alike"):
        mix_sources([a, a], ["x", "x"], None)
    with pytest.raises(ConfigError, match="some datasets have a weight and some not"):
        mix_sources([a, a], ["0", "1"], [1, None])


def test_a_mix_of_packed_shards_is_refused_in_one_line(identity_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "packed"
    pack(identity_tree, out)
    data = MixData(sources=({"name": "shards", "root": str(out)},))
    with pytest.raises(ConfigError, match=r"is read in blocks \(shards, Parquet\)"):
        open_mix(data, "train")


def test_a_config_mix_opens_each_source_as_its_data_kind(identity_parts: tuple[Path, Path]) -> None:
    a, b = identity_parts
    data = MixData(
        sources=(
            {"name": "folder", "root": str(a), "weight": 1},
            {"name": "folder", "root": str(b), "weight": 3, "tag": "cats"},
        ),
        epoch_size=20,
    )
    train = open_mix(data, "train")
    assert isinstance(train, MixedSource) and len(train) == 17
    assert train.proportions() == (PartShare(str(a), 12, 5), PartShare("cats", 5, 15))
    assert train.classes == ("0/ant", "0/bee", "cats/cat")
