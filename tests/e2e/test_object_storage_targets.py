"""Data with targets from a bucket (``data.root=s3://bucket/prefix``, a real S3 server on
127.0.0.1): COCO's layout and a segmentation layout give exactly the local copy's batches,
boxes and masks included, on both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.s3server import S3Server

from dali_pipes import build_loader, compose_config
from dali_pipes.data.sample_objects import ensure_sample_objects, ensure_sample_segmentation

BUCKET = "targets"


def batches(data: list[str], root: str | Path, backend: str) -> list[Any]:
    overrides = [
        *data,
        f"data.root={root}",
        "data.batch_size=4",
        "augment=small",
        f"backend={backend}",
        "backend.device=cpu",
        *(["backend.num_workers=0"] if backend == "torch" else []),
    ]
    with build_loader(compose_config(overrides), "train", rank=1, world_size=2) as loader:
        loader.set_epoch(2)
        return [(x.clone(), y) for x, y in loader]


def same_targets(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return all(
        x["image_id"] == y["image_id"]
        and torch.equal(x["boxes"], y["boxes"])
        and torch.equal(x["masks"], y["masks"])
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("kind", ["coco", "segmentation"])
def test_a_bucket_gives_the_local_copys_batches_with_their_targets(
    s3: S3Server, tmp_path: Path, kind: str, backend: str
) -> None:
    if kind == "coco":
        local = ensure_sample_objects(str(tmp_path), 16, 4)
        data = ["data=coco", "data.masks=true"]
    else:
        local = ensure_sample_segmentation(str(tmp_path), 16, 4)
        data = ["data=segmentation"]
    s3.upload(local, BUCKET, f"{kind}-{backend}")
    remote = batches(data, f"s3://{BUCKET}/{kind}-{backend}", backend)
    here = batches(data, local, backend)
    assert len(remote) == len(here) == 2
    for (x, y), (x0, y0) in zip(remote, here, strict=True):
        assert torch.equal(x, x0) and same_targets(y, y0)
