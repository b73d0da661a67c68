"""How batches leave DALI: on the CPU torch takes DALI's output memory through DLPack (no
copy), so a batch must stay intact however long the loop holds it; and a pipeline of ops
that never branch per sample is built without DALI's conditionals (AutoGraph)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
from conftest import TESTS

from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends import create_loader
from dali_pipes.backends.dali.graph import EncodedFiles, GraphDevices
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.dali.trace import trace
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.data.sources import discover_folder
from dali_pipes.data.specs import SamplingSpec


def spec(root: Path, ops: dict[str, dict[str, object]]) -> LoaderSpec:
    return LoaderSpec(
        source=discover_folder(root),
        train=True,
        batch_size=4,
        augment=AugmentSpec(train=SplitAugment(ops=ops)),
        sampling=SamplingSpec(seed=5),
        backend=DaliBackend(device="cpu", prefetch_queue_depth=2),
    )


def test_batches_held_across_the_epoch_keep_their_values(real_photos: Path) -> None:
    """Every batch of an epoch is kept, then compared with clones taken when it arrived:
    DALI must not reuse the memory torch references."""
    with create_loader(spec(real_photos, {"hflip": {}})) as loader:
        held, clones = [], []
        for images, labels in loader:
            held.append((images, labels))
            clones.append((images.clone(), labels.clone()))
        assert len(held) >= 3
        for (images, labels), (images0, labels0) in zip(held, clones, strict=True):
            assert torch.equal(images, images0) and torch.equal(labels, labels0)
        assert len({images.data_ptr() for images, _ in held}) == len(held)


@pytest.mark.parametrize(
    ("ops", "cpu", "gpu"),
    [
        ({"hflip": {}}, False, False),
        ({"hflip": {}, "randaugment": {}}, False, True),
        ({"randaugment": {"operations": ["Rotate"]}}, False, False),
        ({"grayscale": {"p": 0.5}}, False, True),  # the CPU's is a compiled kernel
        ({"random_invert": {"p": 0.5}}, True, True),  # a user's op with a DALI `if`
    ],
)
def test_only_ops_that_branch_per_sample_turn_on_dalis_conditionals(
    ops: dict[str, dict[str, object]],
    cpu: bool,
    gpu: bool,
    real_photos: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(TESTS / "plugins"))
    importlib.import_module("custom_ops")  # registers random_invert
    pipeline = spec(real_photos, ops).augment.pipeline(True)
    assert (pipeline.needs_conditionals(False), pipeline.needs_conditionals(True)) == (cpu, gpu)


def test_the_gpus_graph_run_as_its_cpu_twin_turns_them_on(real_photos: Path) -> None:
    """RandAugment's slots branch per sample in the GPU's graph, also when it runs on the
    CPU as its twin; the CPU's graph runs them as one compiled kernel, without AutoGraph."""
    ops = spec(real_photos, {"randaugment": {}})
    twin = DaliLoader(ops, twin=True)
    cpu = DaliLoader(ops)
    assert twin.graph.devices == GraphDevices.twin() and cpu.graph.devices == GraphDevices.cpu()
    schemas = {
        name: {op.schema for op in trace(loader.graph.define(EncodedFiles())).ops}
        for name, loader in (("twin", twin), ("cpu", cpu))
    }
    assert "_conditional__Split" in schemas["twin"] and "NumbaFuncImpl" not in schemas["twin"]
    assert "_conditional__Split" not in schemas["cpu"] and "NumbaFuncImpl" in schemas["cpu"]
    twin.close()
    cpu.close()
