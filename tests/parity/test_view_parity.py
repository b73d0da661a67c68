"""The self-supervised presets per view: DALI on the CPU, and the GPU's graph run as its CPU
twin, against the torch backend on real photos, every view's parameters drawn once from
(seed, epoch, sample, view) and fed to each backend.

Every eighth of the 213 shared photos (27; the 13 shipped ones without ../shared), each
view compared alone (views differ in size) within the bound of its ops
(:func:`dali_pipes.selfcheck.bounds.pipeline_bound`; DINO's bicubic crops: ``CUBIC``).
The CPU graph runs colour jitter, grayscale and blur as compiled kernels, the twin as DALI
arithmetic behind conditionals: both are held to the same bound. A view compared with its
neighbour (another crop window, other draws) is far outside it: the comparison is per view.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import BUNDLED_PHOTOS

from dali_pipes import build_loader, compose_config
from dali_pipes.backends.base import Loader
from dali_pipes.backends.cache.gpu import DaliCachedLoader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.config.specs import loader_spec
from dali_pipes.selfcheck.bounds import figures, pipeline_bound

PRESETS = ["simclr", "byol", "dino", "swav"]
RAW = [
    "augment.mean=[0,0,0]",
    "augment.std=[0.00392156862745098,0.00392156862745098,0.00392156862745098]",
]
_RUNS: dict[tuple[str, str], list[torch.Tensor]] = {}

pytestmark = pytest.mark.slow


def views(root: Path, preset: str, kind: str) -> list[torch.Tensor]:
    """One epoch of ``kind`` (torch, dali-cpu, dali-twin, cache-twin: ``data.cache=gpu``'s
    graph on the CPU), each view's batches joined."""
    if (preset, kind) in _RUNS:
        return _RUNS[preset, kind]
    backend = "torch" if kind == "torch" else "dali"
    overrides = [
        "data=folder",
        f"data.root={root}",
        "data.batch_size=16",
        "seed=5",
        f"augment={preset}",
        *RAW,
        f"backend={backend}",
        "backend.device=cpu",
        *(["backend.num_workers=2"] if backend == "torch" else []),
    ]
    world = 8 if root != BUNDLED_PHOTOS else 1
    cfg = compose_config(overrides)
    made: Loader
    if kind in ("dali-twin", "cache-twin"):
        spec = loader_spec(cfg, "train", rank=0, world_size=world)
        made = (
            DaliCachedLoader(spec, twin=True)
            if kind == "cache-twin"
            else DaliLoader(spec, twin=True)
        )
    else:
        made = build_loader(cfg, "train", rank=0, world_size=world)
    with made as loader:
        batches = [batch for batch, _ in loader]
    _RUNS[preset, kind] = [
        torch.cat([b[v] for b in batches]).float() for v in range(len(batches[0]))
    ]
    return _RUNS[preset, kind]


@pytest.mark.parametrize("kind", ["dali-cpu", "dali-twin"])
@pytest.mark.parametrize("preset", PRESETS)
def test_each_view_matches_the_torch_backend_on_real_photos(
    preset: str, kind: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = views(real_photos, preset, "torch")
    ours = views(real_photos, preset, kind)
    spec = loader_spec(compose_config([f"augment={preset}"]), "train", rank=0, world_size=1)
    pipelines = spec.augment.views(True).pipelines
    assert len(ours) == len(reference) == len(pipelines)
    for v, (a, b, pipeline) in enumerate(zip(ours, reference, pipelines, strict=True)):
        assert a.shape == b.shape and a.shape[-2:] == pipeline.size()
        bound = pipeline_bound(
            [op.name for op in pipeline.ops],
            shipped=real_photos == BUNDLED_PHOTOS,
            cubic=pipeline.crop.interpolation == "bicubic",
        )
        assert bound is not None
        measured = figures(a, b)
        with capsys.disabled():
            print(f"\n{preset} {kind} view {v} ({len(a)} photos): {measured} (bound {bound})")
        assert bound.admits(measured), f"view {v}: {measured} exceeds {bound}"


@pytest.mark.parametrize("preset", ["simclr", "dino"])
def test_a_view_against_another_views_reference_is_far_outside_the_bound(
    preset: str, real_photos: Path
) -> None:
    reference = views(real_photos, preset, "torch")
    ours = views(real_photos, preset, "dali-cpu")
    measured = figures(ours[1], reference[0])  # the two globals: same size, other draws
    assert measured.mean > 10, measured


def test_data_cache_gpus_graph_gives_the_loaders_views(real_photos: Path) -> None:
    """``data.cache=gpu``'s graph on decoded whole images (its twin) cuts each view from the
    decoded image as the loader's graph cuts it from the decoded region: the same views."""
    cached = views(real_photos, "swav", "cache-twin")
    twin = views(real_photos, "swav", "dali-twin")
    assert len(cached) == 8 and all(torch.equal(a, b) for a, b in zip(cached, twin, strict=True))
