"""The GPU graphs of mapped torchvision pipelines, traced without a GPU, and run as twins.

Every pipeline a torchvision transform maps to is a DALI graph like a preset's: the ops'
GPU realisations (conditionals for ``RandomApply`` and the policies, ``fn.flip`` for both
flips), the padded crop window (a whole-image decode and a padding ``slice``), the batch
format (uint8 through ``crop_mirror_normalize``). Each is defined for GPU 0, traced and
checked against DALI's operator registry (:mod:`dali_pipes.backends.dali.trace`), for the
GPU, the dali-cpu hand-over and ``data.cache=gpu``; the config path
(``augment.torchvision``) is traced the same way. The twins (the GPU graph with its
operators on the CPU) of the pipelines with the new pieces run against the torch backend.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.v2 as V
from conftest import BUNDLED_PHOTOS

from dali_pipes.augment.from_torchvision import augment_spec
from dali_pipes.backends import create_loader
from dali_pipes.backends.dali.graph import (
    CachedPixels,
    DaliGraph,
    EncodedFiles,
    GraphDevices,
    never_called,
)
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.dali.trace import check
from dali_pipes.backends.specs import DaliBackend, LoaderSpec, TorchBackend
from dali_pipes.data.sources import discover_folder
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.selfcheck.bounds import COLOR_JITTER, CUBIC, EXACT, Bound, figures
from dali_pipes.selfcheck.graphs import GraphCase

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PIPELINES: dict[str, Any] = {
    "eval v1": T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)]),
    "reference train v2 (autoaugment, erasing)": V.Compose(
        [
            V.RandomResizedCrop(176),
            V.RandomHorizontalFlip(),
            V.AutoAugment(),
            V.PILToTensor(),
            V.ToDtype(torch.float32, scale=True),
            V.Normalize(MEAN, STD),
            V.RandomErasing(0.25),
        ]
    ),
    "views v1 (random apply, grayscale, blur, solarize)": T.Compose(
        [
            T.RandomResizedCrop(96),
            T.RandomHorizontalFlip(),
            T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
            T.RandomGrayscale(0.2),
            T.RandomApply([T.GaussianBlur(23), T.RandomSolarize(128, 1.0)], p=0.5),
            T.ToTensor(),
        ]
    ),
    "cifar v1 (padded random crop, vflip, randaugment)": T.Compose(
        [
            T.RandomCrop(32, padding=4, fill=(10, 20, 30)),
            T.RandomVerticalFlip(),
            T.RandAugment(),
            T.ToTensor(),
        ]
    ),
    "uint8 v2 (fixed size, trivialaugment)": V.Compose(
        [V.ToImage(), V.Resize((120, 96)), V.TrivialAugmentWide(), V.RandomSolarize(100)]
    ),
    "centre crop alone, padded, v2": V.Compose([V.CenterCrop(600), V.PILToTensor()]),
    "bicubic eval v1": T.Compose(
        [T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224), T.ToTensor()]
    ),
}
DEVICES = {
    "GPU": GraphDevices.gpu(0),
    "dali-cpu -> GPU": GraphDevices("cpu", "cpu", "gpu", 0),
}


def loader_spec(transform: Any) -> LoaderSpec:
    return LoaderSpec(
        source=discover_folder(BUNDLED_PHOTOS),
        train=True,
        batch_size=8,
        augment=augment_spec(transform),
        sampling=SamplingSpec(seed=5, shuffle=False),
        backend=DaliBackend(device="cpu"),
    )


@pytest.mark.slow
@pytest.mark.parametrize("where", list(DEVICES))
@pytest.mark.parametrize("name", list(PIPELINES))
def test_each_mapped_pipelines_gpu_graph_traces_and_checks_out(name: str, where: str) -> None:
    spec = loader_spec(PIPELINES[name])
    graph = DaliGraph(spec, DEVICES[where], num_threads=1, resize=never_called)
    result = check(f"{name}, {where}", DEVICES[where], lambda: graph.define(EncodedFiles()))
    assert result.ok, result.problems
    cached = DaliGraph(spec, GraphDevices.gpu(0), num_threads=1, resize=never_called)
    result = check(name, GraphDevices.gpu(0), lambda: cached.define(CachedPixels()), decodes=False)
    assert result.ok, result.problems


def test_a_padded_crop_decodes_the_region_inside_the_image_and_pads_its_band() -> None:
    """DALI's region decoders cannot pad: a padded crop decodes its band's part inside the
    image (a region decode), pads it to the band with the fill colour, resizes it and
    places it on the fill (two slices that pad); a crop that stays inside decodes its window."""
    padded = DaliGraph(loader_spec(PIPELINES["cifar v1 (padded random crop, vflip, randaugment)"]),
                       GraphDevices.gpu(0), num_threads=1)  # fmt: skip
    inside = DaliGraph(loader_spec(PIPELINES["eval v1"]), GraphDevices.gpu(0), num_threads=1)
    assert padded.pad_fill == (10, 20, 30) and padded.banded and padded.roi_decode
    assert inside.pad_fill is None and not inside.banded and inside.roi_decode
    traced = check("padded", GraphDevices.gpu(0), lambda: padded.define(EncodedFiles())).graph
    assert traced is not None
    schemas = [op.schema for op in traced.ops]
    assert "decoders__ImageSlice" in schemas and "decoders__Image" not in schemas
    assert schemas.count("Slice") == 2


def test_augment_torchvision_from_the_config_traces_on_the_gpu() -> None:
    transform = (
        "{_target_: torchvision.transforms.v2.Compose, transforms: ["
        "{_target_: torchvision.transforms.v2.RandomCrop, size: 48, padding: 4}, "
        "{_target_: torchvision.transforms.v2.RandomApply, p: 0.5, transforms: ["
        "{_target_: torchvision.transforms.v2.ColorJitter, brightness: 0.4}, "
        "{_target_: torchvision.transforms.v2.RandomVerticalFlip, p: 1.0}]}, "
        "{_target_: torchvision.transforms.v2.PILToTensor}]}"
    )
    folder = ("data=folder", f"data.root={BUNDLED_PHOTOS}", "data.batch_size=8")
    overrides = (*folder, f"augment.torchvision.train={transform}")
    case = GraphCase("augment.torchvision", GraphDevices.gpu(0), overrides)
    assert case.spec().augment.pipeline(True).crop.name == "random_crop"
    result = case.check()
    assert result.ok, result.problems


#: The new pieces' twins (the auto-augment policies' are tests/parity/test_twins.py's,
#: where the GPU's equalize rule is accounted for).
TWINS: dict[str, tuple[Any, Bound]] = {
    "views": (PIPELINES["views v1 (random apply, grayscale, blur, solarize)"], COLOR_JITTER),
    "padded random crop, vflip, random apply": (
        T.Compose(
            [
                T.RandomCrop(48, padding=6, fill=(10, 20, 30)),
                T.RandomVerticalFlip(),
                T.RandomApply([T.ColorJitter(0.4, 0.4), T.RandomSolarize(128, 1.0)], 0.5),
                T.PILToTensor(),
            ]
        ),
        COLOR_JITTER,
    ),
    "centre crop alone, padded": (PIPELINES["centre crop alone, padded, v2"], EXACT),
    "bicubic resize and centre crop": (PIPELINES["bicubic eval v1"], CUBIC),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TWINS))
def test_the_gpu_graphs_twin_matches_the_torch_backend(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The GPU graph's logic on the CPU: the padding slice, random_apply's conditional,
    the flips, against the torch backend (raw pixels), within the ops' bound."""
    transform, bound = TWINS[name]
    spec = loader_spec(transform)
    raw = replace(spec.augment, mean=(0.0, 0.0, 0.0), std=(1 / 255,) * 3, dtype="float32")
    spec = replace(spec, augment=raw)
    with DaliLoader(spec, twin=True) as twin:
        ours = torch.cat([images for images, _ in twin])
    torch_spec = replace(spec, backend=TorchBackend(device="cpu", num_workers=0))
    with create_loader(torch_spec) as loader:
        reference = torch.cat([images for images, _ in loader])
    measured = figures(ours, reference)
    with capsys.disabled():
        print(f"\ntwin of {name}: {measured} (bound {bound})")
    assert bound.admits(measured)
