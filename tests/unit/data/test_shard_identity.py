"""A sample's augmentation follows the sample: the same crop and flip from a folder and
from its packed shards.

The draws are keyed by the sample's identity -- the index of its file in the folder's
ImageFolder order, which ``pack`` keeps in each sample's key -- not by its position in the
dataset, which packing shuffles. The two loaders read the samples in different orders
(files vs. shard by shard), so the images are compared per source file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import BUNDLED_PHOTOS

from dali_pipes import build_loader, compose_config
from dali_pipes.data.shards import open_split
from dali_pipes.tools.pack import run_pack

KINDS = ["torch", "dali-cpu", "cache-ram"]
SIZE = 48
SEED, EPOCH = 7, 3


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed photos (real texture: a crop window one pixel off shows) in shards of
    about two photos each."""
    out = tmp_path_factory.mktemp("photo-shards") / "out"
    overrides = ["data=folder", f"data.root={BUNDLED_PHOTOS}", f"out={out}"]
    run_pack(compose_config([*overrides, "pack.shard_size_mb=0.15"], config_name="pack"))
    return out


def make(kind: str, data: list[str]) -> Any:
    backend, _, where = kind.partition("-")
    overrides = [
        *data,
        "data.batch_size=4",
        f"seed={SEED}",
        f"augment.train.crop.size={SIZE}",
        "backend.device=cpu",
    ]
    if backend == "cache":
        overrides += ["backend=torch", f"data.cache={where}"]
    else:
        overrides.append(f"backend={backend}")
    if backend in ("torch", "cache"):
        overrides.append("backend.num_workers=1")
    return build_loader(compose_config(overrides), "train")


def by_file(loader: Any, files: list[str], epoch: int) -> tuple[list[str], dict[str, Any]]:
    """The files of ``epoch`` in the order read, and each one's training image.

    ``files[i]``: the source file of the loader's sample ``i``; which sample each image is
    comes from the loader's plan for the epoch (its sampler)."""
    loader.set_epoch(epoch)
    images = torch.cat([x for x, _ in loader])
    order = np.concatenate(loader.sampler.batches(epoch, loader.batch_size))
    read = [files[int(i)] for i in order]
    assert len(read) == len(images) == len(set(read))
    return read, dict(zip(read, images, strict=True))


@pytest.mark.parametrize("kind", KINDS)
def test_each_photo_gets_the_same_crop_and_flip_from_the_folder_and_from_its_shards(
    kind: str, packed: Path
) -> None:
    names, *_ = open_split(packed, "train")
    with make(kind, ["data=folder", f"data.root={BUNDLED_PHOTOS}"]) as folder:
        files = list(folder.spec.source.files)
        # A packed sample's key is its file's index in the folder: s000000012.jpg -> 12.
        packed_files = [files[int(n.rsplit(":s", 1)[1].split(".")[0])] for n in names]
        with make(kind, ["data=shards", f"data.root={packed}"]) as shards:
            order_f, from_folder = by_file(folder, files, EPOCH)
            order_s, from_shards = by_file(shards, packed_files, EPOCH)
            _, next_epoch = by_file(shards, packed_files, EPOCH + 1)
    assert sorted(order_f) == sorted(order_s) == sorted(files)
    assert order_f != order_s, "the two read the photos in different orders"
    different = [f for f in files if not torch.equal(from_folder[f], from_shards[f])]
    assert different == [], "same photo, other crop window or flip"
    # The augmentation is random: the next epoch crops the photos differently.
    assert sum(not torch.equal(from_shards[f], next_epoch[f]) for f in files) >= len(files) - 1
