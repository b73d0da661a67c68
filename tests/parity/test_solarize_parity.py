"""Solarisation on DALI's CPU, and in the GPU's graph run as its CPU twin, against the torch
backend on real photos, the same parameters fed to each.

Every third photo (71 of the 213 shared ones; all 13 shipped ones without ../shared), the
threshold drawn per sample from (seed, epoch, sample) and fed to both backends. At the
recipes' threshold of 128 solarising is continuous (127 stays 127, 128 becomes 127), so
the resize's one-level difference stays one level; at 100 a value one level from the
threshold lands on either side of it (99 or 155): the auto-augment Solarize bound covers
that. A wrong threshold on one side is far outside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends import create_loader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec, TorchBackend
from dali_pipes.data.sources import discover_folder
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.selfcheck.bounds import OP_BOUNDS, figures

CASES = {
    "threshold 128, p 0.5": {"solarize": {"threshold": 128, "p": 0.5}},
    "flip, threshold 100, p 1": {"hflip": {}, "solarize": {"threshold": 100, "p": 1.0}},
}
_DALI: dict[str, torch.Tensor] = {}


def run(
    root: Path, ops: dict[str, Any], backend: DaliBackend | TorchBackend, twin: bool = False
) -> torch.Tensor:
    augment = AugmentSpec(
        train=SplitAugment(ops=ops), mean=(0.0, 0.0, 0.0), std=(1 / 255, 1 / 255, 1 / 255)
    )
    source = discover_folder(root)
    spec = LoaderSpec(
        source=source,
        train=True,
        batch_size=16,
        augment=augment,
        sampling=SamplingSpec(seed=5, shuffle=False, world_size=3 if len(source) > 100 else 1),
        backend=backend,
    )
    with DaliLoader(spec, twin=True) if twin else create_loader(spec) as loader:
        return torch.cat([images.float() for images, _ in loader])


def dali(root: Path, case: str) -> torch.Tensor:
    if case not in _DALI:
        _DALI[case] = run(root, CASES[case], DaliBackend(device="cpu"))
    return _DALI[case]


@pytest.mark.parametrize("case", list(CASES))
def test_solarize_on_dali_cpu_matches_the_torch_backend_on_real_photos(
    case: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = dali(real_photos, case)
    reference = run(real_photos, CASES[case], TorchBackend(device="cpu", num_workers=0))
    assert ours.shape == reference.shape
    measured = figures(ours, reference)
    bound = OP_BOUNDS["solarize"]
    with capsys.disabled():
        print(f"\nsolarize parity ({case}, {len(ours)} photos): {measured} (bound {bound})")
    assert bound.admits(measured), f"{measured} exceeds {bound}"
    unsolarized = run(
        real_photos,
        {k: v for k, v in CASES[case].items() if k != "solarize"},
        TorchBackend(device="cpu", num_workers=0),
    )
    assert figures(ours, unsolarized).mean > 5  # the op did something on DALI's side


def test_the_bound_catches_a_wrong_threshold_fed_to_one_backend(real_photos: Path) -> None:
    case = "threshold 128, p 0.5"
    wrong = {"solarize": {"threshold": 100, "p": 0.5}}
    measured = figures(
        dali(real_photos, case), run(real_photos, wrong, TorchBackend(device="cpu", num_workers=0))
    )
    assert not OP_BOUNDS["solarize"].admits(measured), measured


def test_the_gpu_graph_run_as_its_cpu_twin_matches_the_torch_backend(real_photos: Path) -> None:
    case = "flip, threshold 100, p 1"
    twin = run(real_photos, CASES[case], DaliBackend(device="cpu"), twin=True)
    measured = figures(
        twin, run(real_photos, CASES[case], TorchBackend(device="cpu", num_workers=0))
    )
    assert OP_BOUNDS["solarize"].admits(measured), measured
