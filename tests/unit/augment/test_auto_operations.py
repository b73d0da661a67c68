"""One record per auto-augment operation: an operation added from outside the package is
one registration, and every backend realises it (torch, DALI's compiled CPU kernel, the
GPU graph's conditionals as its CPU twin) within the warps' bound; the built-in records
keep torchvision's tables and the policies' default sets."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchvision.transforms.v2 as v2
from conftest import BUNDLED_PHOTOS, TESTS

from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.auto.operations import REGISTRY, Operation, Range, register_operation
from dali_pipes.augment.ops.randaugment import OPERATIONS as RANDAUGMENT
from dali_pipes.augment.ops.trivialaugment import OPERATIONS as TRIVIALAUGMENT
from dali_pipes.backends import create_loader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.config.compose import compose_config
from dali_pipes.config.specs import loader_spec
from dali_pipes.selfcheck.bounds import OPERATION, figures

PLUGINS = TESTS / "plugins"


def batches(backend: str, *, twin: bool = False, magnitude: int = 20) -> torch.Tensor:
    """One batch of the 13 shipped photos, RandAugment's only operation ZoomIn (magnitude
    20 of 31 bins: 1.33x)."""
    zoom = f"{{num_ops: 1, magnitude: {magnitude}, operations: [ZoomIn]}}"
    overrides = [
        "data=folder",
        f"data.root={BUNDLED_PHOTOS}",
        "data.batch_size=13",
        "augment.mean=[0,0,0]",
        "augment.std=[0.00392156862745098,0.00392156862745098,0.00392156862745098]",
        f"backend={backend}",
        "backend.device=cpu",
        "~augment.train.ops.hflip",
        "augment.imports=[custom_auto_ops]",
        f"+augment.train.ops.randaugment={zoom}",
    ]
    spec = loader_spec(compose_config(overrides), "train")
    with DaliLoader(spec, twin=True) if twin else create_loader(spec) as loader:
        return torch.cat([images.float() for images, _ in loader])


def test_an_operation_registered_outside_the_package_runs_on_every_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    reference = batches("torch")
    unzoomed = batches("torch", magnitude=0)  # scale 1: the crop as it is
    assert figures(reference, unzoomed).mean > 5  # the operation does something
    kernel, twin = batches("dali"), batches("dali", twin=True)
    bound = OPERATION["Rotate"]  # a warp at fractional positions, nearest neighbour
    for name, ours in (("compiled kernel", kernel), ("GPU graph as its twin", twin)):
        measured = figures(ours, reference)
        assert bound.admits(measured), f"{name}: {measured} exceeds {bound}"
    assert "ZoomIn" in auto.OPS and "ZoomIn" not in RANDAUGMENT  # named, not a default


def test_the_built_in_records_keep_torchvisions_tables_and_default_sets() -> None:
    assert auto.OPS[:15] == (
        "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
        "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast",
        "Equalize", "Invert",
    )  # fmt: skip
    assert RANDAUGMENT == tuple(v2.RandAugment._AUGMENTATION_SPACE)
    assert TRIVIALAUGMENT == tuple(v2.TrivialAugmentWide._AUGMENTATION_SPACE)


def test_a_name_registers_once_and_an_affine_kind_needs_its_arguments() -> None:
    same: dict[str, Any] = {"name": "Identity", "kind": 0, "torch": REGISTRY["Rotate"].torch}
    with pytest.raises(ValueError, match="already registered"):
        register_operation(Operation(**same))
    with pytest.raises(ValueError, match="affine arguments"):
        Operation("Skew", 1, REGISTRY["Rotate"].torch, {"standard": Range(0, 1)})
