"""Each backend hands batches over on the model's device: DALI's copy, the torch backend's
pinned side-stream prefetch, the synthetic batch made in place (``gpu`` tests: the real
hand-overs).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import gpu
from helpers.launch import CPU, GPU0, cuda, synthetic_cfg
from helpers.warm import python

from dali_pipes import build_loader, compose_config
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import torch as torch_backend
from dali_pipes.backends.handover import Handover, Normalizer
from dali_pipes.backends.synthetic import SyntheticLoader
from dali_pipes.config.loaders import model_device
from dali_pipes.config.specs import loader_spec

ROOT = Path(__file__).resolve().parents[1]


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------- the backends


@pytest.mark.parametrize("backend", ["torch", "synthetic"])
@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ("backend.device=cpu",),
        ("backend.device=cpu", "trainer.device=cpu"),
        ("trainer.device=cpu",),
    ],
)
def test_the_loader_hands_batches_over_on_the_model_device(
    identity_tree: Path, backend: str, overrides: tuple[str, ...]
) -> None:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            "data.batch_size=4",
            "augment.train.crop.size=16",
            f"backend={backend}",
            *(["backend.num_workers=0"] if backend == "torch" else []),
            *overrides,
        ]
    )
    with build_loader(cfg, "train") as loader:
        images, labels = next(iter(loader))
        assert loader.device == model_device(cfg)
        assert images.device == labels.device == loader.device


def _torch_spec(identity_tree: Path, *overrides: str) -> Any:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            "backend=torch",
            "backend.num_workers=0",
            *overrides,
        ]
    )
    return loader_spec(cfg, "train")


@pytest.mark.parametrize(
    "overrides", [("backend.device=gpu",), ("backend.device=cpu", "trainer.device=cuda")]
)
def test_the_torch_backend_pins_and_normalises_on_the_gpu_for_a_gpu_model(
    monkeypatch: pytest.MonkeyPatch, identity_tree: Path, overrides: tuple[str, ...]
) -> None:
    """backend.device=cpu + trainer.device=cuda does what backend.device=gpu always did:
    pinned uint8 batches, normalised on the model's GPU."""
    cuda(monkeypatch, 1)
    normalisers: list[torch.device] = []

    class Recorder:
        def __init__(self, augment: AugmentSpec, device: torch.device) -> None:
            normalisers.append(device)

    monkeypatch.setattr(torch_backend, "Normalizer", Recorder)
    loader = torch_backend.TorchLoader(_torch_spec(identity_tree, *overrides))
    assert loader.device == GPU0 and normalisers == [GPU0]
    assert loader._loader.pin_memory


def test_the_torch_backend_on_a_cpu_model_neither_pins_nor_moves(
    monkeypatch: pytest.MonkeyPatch, identity_tree: Path
) -> None:
    cuda(monkeypatch, 1)
    loader = torch_backend.TorchLoader(_torch_spec(identity_tree, "backend.device=cpu"))
    assert loader.device == CPU and not loader._loader.pin_memory


def test_the_synthetic_backend_makes_its_batch_on_the_model_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 1)
    made: list[torch.device] = []

    def make(self: SyntheticLoader, size: int) -> torch.Tensor:
        made.append(self.device)
        return torch.empty(0)

    monkeypatch.setattr(SyntheticLoader, "_make", make)
    cfg = synthetic_cfg("backend=synthetic", "backend.device=cpu", "trainer.device=cuda")
    assert SyntheticLoader(loader_spec(cfg, "train")).device == GPU0 and made == [GPU0]


def test_the_hand_over_gives_batches_unchanged_or_prepared_on_the_cpu() -> None:
    batches = [
        (torch.full((2, 3, 4, 4), k, dtype=torch.uint8), torch.tensor([k, k])) for k in (1, 2)
    ]
    plain = list(Handover(CPU)(batches))
    for (images, labels), (raw, raw_labels) in zip(plain, batches, strict=True):
        assert torch.equal(images, raw) and torch.equal(labels, raw_labels)
    norm = Normalizer(AugmentSpec(), CPU)
    prepared = list(Handover(CPU, norm)(batches))
    for (images, labels), (raw, raw_labels) in zip(prepared, batches, strict=True):
        assert torch.equal(images, norm(raw)) and torch.equal(labels, raw_labels)


# --------------------------------------------------------------------------- with a GPU


def gpu_folder(root: Path, *overrides: str) -> Any:
    return compose_config(
        [
            "data=folder",
            f"data.root={root}",
            "data.batch_size=4",
            "augment.train.crop.size=32",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            *overrides,
        ]
    )


@gpu
@pytest.mark.parametrize("backend", ["dali", "torch", "synthetic"])
def test_cpu_decoding_feeds_a_gpu_model(identity_tree: Path, backend: str) -> None:
    cfg = gpu_folder(
        identity_tree, f"backend={backend}", "backend.device=cpu", "trainer.device=cuda"
    )
    assert model_device(cfg).type == "cuda"
    with build_loader(cfg, "train") as loader:
        assert loader.device == model_device(cfg)
        for images, labels in loader:
            assert images.device == labels.device == loader.device
            assert images.dtype == torch.float32 and images.shape[1:] == (3, 32, 32)


@gpu
@pytest.mark.slow
def test_training_with_dali_on_the_cpu_puts_the_model_on_the_gpu(
    identity_tree: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            python(),
            "-m",
            "dali_pipes.train",
            "data=folder",
            f"data.root={identity_tree}",
            "data.batch_size=4",
            "augment.train.crop.size=32",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            "model=small_cnn",
            "trainer=quick",
            "trainer.epochs=1",
            "backend=dali",
            "backend.device=cpu",
            "trainer.device=cuda",
            f"output_dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = (tmp_path / "train.log").read_text()
    assert "with backend=dali on cuda:0" in log, log[-2000:]
