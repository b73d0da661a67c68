"""The ``feed`` and ``reader`` bench candidates: the GPU path's host side alone and DALI's
reader alone, each an epoch of the same files, nothing decoded."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from helpers.shards import pack

from dali_pipes import compose_config
from dali_pipes.backends import create_loader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.config.specs import loader_spec
from dali_pipes.errors import DaliPipesError
from dali_pipes.tools.bench import run_bench
from dali_pipes.tools.host_side import FeedOnly, ReaderOnly, feed_spec

SMALL = ["augment.train.crop.size=16", "data.batch_size=4", "backend.num_threads=1"]


def spec_of(root: Path, *overrides: str) -> LoaderSpec:
    cfg = compose_config(["data=folder", f"data.root={root}", *SMALL, *overrides], "bench")
    return loader_spec(cfg, "train", rank=0, world_size=1)


def options(spec: LoaderSpec) -> DaliBackend:
    assert isinstance(spec.backend, DaliBackend)
    return spec.backend


def test_the_feed_alone_hands_over_the_loaders_planned_batches(identity_tree: Path) -> None:
    spec = spec_of(identity_tree, "backend.device=cpu")
    feed = FeedOnly(feed_spec(spec, options(spec)))
    with create_loader(spec) as loader, feed:
        loader.set_epoch(1)
        feed.set_epoch(1)
        planned = [labels.tolist() for _, labels in loader]
        fed = [labels.tolist() for images, labels in feed]
        assert fed == planned and sum(map(len, fed)) == len(spec.source)
        assert feed.graph.devices.gpu_graph, "the GPU graph's feed (its CPU twin)"
        assert loader.spec.source is feed.spec.source


def test_the_reader_alone_reads_each_file_of_the_folder_once_per_epoch(
    identity_tree: Path,
) -> None:
    spec = spec_of(identity_tree)
    with ReaderOnly(spec, options(spec)) as reader:
        for _ in range(2):
            labels = [int(label) for _, batch in reader for label in batch]
            assert Counter(labels) == Counter(spec.source.labels.tolist())


def test_the_reader_refuses_a_packed_dataset_in_one_line(
    identity_tree: Path, tmp_path: Path
) -> None:
    shards = tmp_path / "pack"
    pack(identity_tree, shards)
    cfg = compose_config(["data=shards", f"data.root={shards}", *SMALL], "bench")
    spec = loader_spec(cfg, "train", rank=0, world_size=1)
    with pytest.raises(DaliPipesError, match=r"leave reader out of bench\.candidates"):
        ReaderOnly(spec, options(spec))


def test_bench_reports_the_feed_beside_dalis_reader(identity_tree: Path, tmp_path: Path) -> None:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            *SMALL,
            "bench.repeats=1",
            "bench.warmup_images=4",
            "bench.min_images=20",
            "bench.candidates=[feed,reader]",
            f"bench.out={tmp_path / 'bench.json'}",
        ],
        config_name="bench",
    )
    rows = {r["name"]: r for r in run_bench(cfg)["results"]}
    feed, reader = rows["feed"], rows["reader"]
    assert feed["images_per_s_median"] > 0 and reader["images_per_s_median"] > 0
    assert feed["vs_peer"] == pytest.approx(
        feed["images_per_s_median"] / reader["images_per_s_median"]
    )
    assert reader["vs_peer"] == 1.0 and "no decoding" in feed["note"]
