"""The GPU graph of a torchvision ``Grayscale()`` pipeline, traced without a GPU, and its
twin against the torch backend, both handing over ``[N, 1, H, W]`` batches.

A one-channel pipeline is the three-channel graph (``Grayscale()`` is the grayscale op)
whose batches the loader cuts to their first channel; the graph is traced for the GPU, the
dali-cpu hand-over and ``data.cache=gpu`` like every mapped pipeline's
(tests/unit/backends/test_torchvision_graphs.py), and from the config
(``augment.torchvision``); the twin (the GPU graph's operators on the CPU) runs against the
torch backend.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torchvision.transforms as T
from conftest import BUNDLED_PHOTOS
from test_torchvision_graphs import DEVICES, loader_spec

from dali_pipes.backends import create_loader
from dali_pipes.backends.dali.graph import CachedPixels, DaliGraph, EncodedFiles, GraphDevices
from dali_pipes.backends.dali.graph import never_called as no_resize
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.dali.trace import check
from dali_pipes.backends.specs import TorchBackend
from dali_pipes.selfcheck.bounds import COLOR_JITTER, figures
from dali_pipes.selfcheck.graphs import GraphCase

GREY = T.Compose(
    [
        T.RandomResizedCrop(48),
        T.RandomHorizontalFlip(),
        T.Grayscale(),
        T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
        T.RandomSolarize(128, p=0.3),
        T.ToTensor(),
        T.Normalize([0.449], [0.226]),
        T.RandomErasing(0.5, value=[0.3]),
    ]
)


@pytest.mark.slow
@pytest.mark.parametrize("where", list(DEVICES))
def test_a_grayscale_pipelines_gpu_graph_traces_and_checks_out(where: str) -> None:
    spec = loader_spec(GREY)
    assert spec.augment.channels == 1
    graph = DaliGraph(spec, DEVICES[where], num_threads=1, resize=no_resize)
    result = check(f"grey, {where}", DEVICES[where], lambda: graph.define(EncodedFiles()))
    assert result.ok, result.problems
    cached = DaliGraph(spec, GraphDevices.gpu(0), num_threads=1, resize=no_resize)
    result = check(
        "grey", GraphDevices.gpu(0), lambda: cached.define(CachedPixels()), decodes=False
    )
    assert result.ok, result.problems


def test_augment_torchvision_grayscale_from_the_config_traces_on_the_gpu() -> None:
    v2 = "torchvision.transforms.v2"
    transform = (
        f"{{_target_: {v2}.Compose, transforms: ["
        f"{{_target_: {v2}.Resize, size: 64}}, {{_target_: {v2}.CenterCrop, size: 56}}, "
        f"{{_target_: {v2}.Grayscale}}, {{_target_: {v2}.PILToTensor}}]}}"
    )
    overrides = (
        "data=folder",
        f"data.root={BUNDLED_PHOTOS}",
        "data.batch_size=8",
        f"augment.torchvision.train={transform}",
        f"augment.torchvision.val={transform}",
    )
    case = GraphCase("augment.torchvision grey", GraphDevices.gpu(0), overrides)
    augment = case.spec().augment
    assert (augment.channels, augment.dtype) == (1, "uint8")
    result = case.check()
    assert result.ok, result.problems


@pytest.mark.slow
def test_the_grayscale_gpu_graphs_twin_matches_the_torch_backend(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Raw pixels, one channel, within the colour jitter's bound (the ops' own)."""
    spec = loader_spec(GREY)
    raw = replace(spec.augment, mean=(0.0, 0.0, 0.0), std=(1 / 255,) * 3, dtype="float32")
    spec = replace(spec, augment=raw)
    with DaliLoader(spec, twin=True) as twin:
        ours = [images for images, _ in twin]
    torch_spec = replace(spec, backend=TorchBackend(device="cpu", num_workers=0))
    with create_loader(torch_spec) as loader:
        reference = [images for images, _ in loader]
    assert [b.shape for b in ours] == [b.shape for b in reference]
    assert all(b.shape[1:] == (1, 48, 48) for b in ours)
    measured = figures(torch.cat(ours), torch.cat(reference))
    with capsys.disabled():
        print(f"\ntwin of the grey pipeline: {measured} (bound {COLOR_JITTER})")
    assert COLOR_JITTER.admits(measured)
