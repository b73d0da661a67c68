"""The data source of docs/how-to/own-source.md (``data=csv``) through the batch contract.

The page's example is loaded as written (its code block run as a module, so it registers
``data=csv`` without running its demo). Then the contract's own tests
(tests/contract/test_contract.py) run with every loader they build reading a CSV that
lists the tree's images in ImageFolder order: where they compose ``data=folder
data.root=TREE`` they get ``data=csv data.file=TREE.csv``. The reference they compare
with is unchanged (torchvision's ImageFolder + DistributedSampler + DataLoader), so the
batches being what the contract says proves the example keeps it, on every backend. Last,
the example's source object given to ``DALIIterator`` itself (no config) reads as the folder.
"""

from __future__ import annotations

import csv
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import test_contract as contract
import torch
from conftest import BUNDLED_PHOTOS, REPO, gpu
from omegaconf import DictConfig
from torchvision.datasets import ImageFolder

from dali_pipes import DALIIterator, compose_config
from dali_pipes.data.registry import SOURCES

PAGE = REPO / "docs" / "how-to" / "own-source.md"
KINDS = ["torch", "dali-cpu", "synthetic", pytest.param("dali-gpu", marks=gpu)]


def example_code(page: Path = PAGE) -> str:
    """The page's Python block that registers the source."""
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)
    [code] = [block for block in blocks if "register_source(" in block]
    return str(code)


@pytest.fixture(scope="module")
def example() -> Iterator[types.ModuleType]:
    """The page's example as a module (importable by name, so its classes pickle); its
    ``data=csv`` is unregistered after this file's tests, with the module."""
    module = types.ModuleType("own_source_example")
    sys.modules[module.__name__] = module
    with SOURCES.restored():
        exec(compile(example_code(), str(PAGE), "exec"), module.__dict__)
        yield module
    del sys.modules[module.__name__]


def listing(root: Path, out: Path) -> Path:
    """A CSV of ``root``'s images in ImageFolder order (absolute paths: the CSV is not
    in the tree)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{root.name}.csv"
    folder = ImageFolder(str(root))
    with path.open("w", newline="") as f:
        for file, label in folder.samples:
            csv.writer(f).writerow([file, folder.classes[label]])
    return path


@pytest.fixture
def through_csv(
    example: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[list[Any]]:
    """The contract's loaders read the example's source; the sources they were built on."""
    built: list[Any] = []

    def compose(overrides: list[str]) -> DictConfig:
        if "data=folder" in overrides:
            root = Path(next(o for o in overrides if o.startswith("data.root=")).split("=", 1)[1])
            file = listing(root, tmp_path / "lists")
            overrides = [
                "data=csv" if o == "data=folder" else f"data.file={file}"
                if o.startswith("data.root=") else o
                for o in overrides
            ]  # fmt: skip
            built.append(file)
        return compose_config(overrides)

    monkeypatch.setattr(contract, "compose_config", compose)
    yield built


Clause = Callable[[str, Path], None]
#: Each clause of the contract, as test_contract.py checks it, on the flat-colour tree.
CLAUSES: dict[str, Clause] = {
    "normalised-float-images-int64-labels": lambda kind, tree: (
        contract.test_batches_are_normalised_float_images_and_int64_labels(kind, "imagenet", tree)
    ),
    "len-and-last-partial-batch": lambda kind, tree: (
        contract.test_len_counts_batches_and_the_last_partial_batch_follows_drop_last(
            kind, False, "imagenet", tree
        )
    ),
    "len-with-drop-last": lambda kind, tree: (
        contract.test_len_counts_batches_and_the_last_partial_batch_follows_drop_last(
            kind, True, "imagenet", tree
        )
    ),
    "break-and-iterate-again": lambda kind, tree: (
        contract.test_breaking_out_early_and_iterating_again_gives_a_full_epoch(
            kind, "imagenet", tree
        )
    ),
    "set-epoch-order": lambda kind, tree: (
        contract.test_set_epoch_makes_the_order_a_function_of_seed_and_epoch(kind, "imagenet", tree)
    ),
    "imagefolder-classes-and-order": lambda kind, tree: (
        contract.test_class_indices_and_order_match_imagefolder(kind, "imagenet", tree)
    ),
    "dtype-and-channels-last": lambda kind, tree: (
        contract.test_output_dtype_and_channels_last_follow_the_config(
            kind, "float16", "imagenet", tree
        )
    ),
}
#: Sharding, on the backends that read images: (world size, drop_last) by name.
SHARDING: dict[str, tuple[int, bool]] = {
    f"shards-{world}-ranks{'-drop-last' if drop else ''}": (world, drop)
    for world in (2, 3)
    for drop in (False, True)
}


@pytest.mark.parametrize("clause", CLAUSES)
@pytest.mark.parametrize("kind", KINDS)
def test_the_docs_example_source_keeps_the_contract(
    kind: str, clause: str, identity_tree: Path, through_csv: list[Any]
) -> None:
    CLAUSES[clause](kind, identity_tree)
    assert through_csv, "the contract's loaders were not built on the example's source"


@pytest.mark.parametrize("clause", SHARDING)
@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_the_docs_example_source_shards_like_distributed_sampler(
    kind: str, clause: str, identity_tree: Path, through_csv: list[Any]
) -> None:
    world, drop = SHARDING[clause]
    contract.test_shards_are_disjoint_equal_length_and_cover_every_sample(
        kind, world, drop, "imagenet", identity_tree
    )
    assert through_csv


@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_the_docs_example_source_gives_the_references_pixels(
    kind: str, through_csv: list[Any]
) -> None:
    """Eval geometry on the shipped photos (read through the CSV) within the parity bounds
    of the reference, as test_contract.py checks a folder."""
    contract.test_pixels_of_textured_photos_equal_the_references_up_to_resampling(kind, False)
    assert through_csv and through_csv[0].stem == BUNDLED_PHOTOS.name


def test_the_loaders_read_the_example_source_itself(
    example: types.ModuleType, identity_tree: Path, through_csv: list[Any]
) -> None:
    with contract.make("torch", identity_tree) as loader:
        assert isinstance(loader.spec.source, example.CsvSource)
        assert loader.dataset.samples[0][0].endswith("ant/img_00.jpg")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_the_example_source_given_to_daliiterator_reads_as_the_folder_does(
    example: types.ModuleType, identity_tree: Path, tmp_path: Path, train: bool
) -> None:
    """No config: the page's source object itself, as a ``DataLoader`` takes a dataset."""
    source = example.CsvSource(listing(identity_tree, tmp_path), read_timeout=60)
    batches = []
    for data in (source, str(identity_tree)):
        with DALIIterator(data, batch_size=4, device="cpu", augment="small", train=train) as it:
            it.set_epoch(1)
            batches.append([(x.clone(), y.clone()) for x, y in it])
    for (x, y), (x0, y0) in zip(*batches, strict=True):
        assert torch.equal(y, y0) and torch.equal(x, x0)
