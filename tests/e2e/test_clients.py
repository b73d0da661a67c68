"""Real training libraries drive our loaders as they drive a DataLoader (the dev extra
installs them): Accelerate (prepare, checkpointing with the loader registered,
skip_first_batches), timm (a timm model trained on our mixup targets with its
SoftTargetCrossEntropy), torchdata.nodes (wrapping the loader, state round trip) and
Lightning (a real Trainer fit), each on DALI's CPU pipeline and on the torch backend.
The 2-process runs (gather_for_metrics, bad files under skip) are in test_distributed_skip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import BUNDLED_PHOTOS

from dali_pipes import build_loader, compose_config

BACKENDS = ["dali", "torch"]
SIZE = 32


def photo_loader(backend: str, *extra: str, split: str = "train") -> Any:
    """The 13 shipped photos (3 classes), 32 px crops, batches of 4, on the CPU."""
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={BUNDLED_PHOTOS}",
            "data.batch_size=4",
            f"backend={backend}",
            "backend.device=cpu",
            f"augment.train.crop.size={SIZE}",
            f"augment.val.crop.resize={SIZE + 4}",
            f"augment.val.crop.size={SIZE}",
            *(["backend.num_workers=1"] if backend == "torch" else []),
            *extra,
        ]
    )
    return build_loader(cfg, split)


def tiny_model(classes: int = 3) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, stride=4), torch.nn.Flatten(), torch.nn.LazyLinear(classes)
    )


def same(a: list[tuple[torch.Tensor, torch.Tensor]], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        torch.equal(x, u) and torch.equal(y, v) for (x, y), (u, v) in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_accelerate_prepares_checkpoints_and_skips_batches_of_our_loader(
    backend: str, tmp_path: Path
) -> None:
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True)
    loader = photo_loader(backend)
    model = tiny_model()
    model(torch.zeros(1, 3, SIZE, SIZE))  # materialise the lazy layer
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, prepared = acc.prepare(model, optimizer, loader)
    acc.register_for_checkpointing(prepared)
    prepared.set_epoch(1)
    whole = list(prepared)

    # skip_first_batches rebuilds a DataLoader from the loader's attributes
    prepared.set_epoch(1)
    skipped = acc.skip_first_batches(prepared, 2)
    assert len(skipped) == len(whole) - 2
    assert same(whole[2:], list(skipped))

    # save_state mid-epoch, load_state into a fresh loader: the rest of the epoch
    prepared.set_epoch(1)
    batches = iter(prepared)
    for images, labels in (next(batches), next(batches)):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        acc.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    acc.save_state(str(tmp_path / "state"))
    fresh = photo_loader(backend)  # as a restarted job builds it
    restarted = accelerate.Accelerator(cpu=True)
    restarted.register_for_checkpointing(fresh)
    restarted.load_state(str(tmp_path / "state"))
    assert same(whole[2:], list(fresh))
    for held in (loader, fresh):
        held.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_timm_model_trains_on_our_mixup_targets_with_timms_soft_target_loss(
    backend: str,
) -> None:
    timm = pytest.importorskip("timm")
    from timm.loss import SoftTargetCrossEntropy

    loader = photo_loader(backend, "+augment.train.batch.mixup={label_smoothing: 0.1}")
    model = timm.create_model("resnet10t", pretrained=False, num_classes=loader.num_classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = SoftTargetCrossEntropy()
    for step, (images, targets) in enumerate(loader):
        assert targets.shape == (len(images), 3) and targets.dtype == torch.float32
        loss = criterion(model(images), targets)
        assert torch.isfinite(loss)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step == 1:
            break
    loader.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_torchdata_nodes_wrap_our_loader_and_restore_its_state(backend: str) -> None:
    nodes = pytest.importorskip("torchdata.nodes")
    loader = photo_loader(backend)
    loader.set_epoch(3)
    wrapped = nodes.Loader(nodes.IterableWrapper(loader))
    it = iter(wrapped)
    head = [next(it), next(it)]
    state = wrapped.state_dict()
    rest = list(it)
    assert len(head) + len(rest) == len(loader)

    fresh = photo_loader(backend)
    again = nodes.Loader(nodes.IterableWrapper(fresh))
    again.load_state_dict(state)
    assert same(rest, list(again))
    for held in (loader, fresh):
        held.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lightning_trainer_fits_on_our_loaders(backend: str, tmp_path: Path) -> None:
    lightning = pytest.importorskip("lightning")
    module_base: Any = lightning.LightningModule

    class Classifier(module_base):
        def __init__(self) -> None:
            super().__init__()
            self.net = tiny_model()
            self.seen = {"train": 0, "val": 0}

        def training_step(self, batch: Any, _: int) -> torch.Tensor:
            images, labels = batch
            self.seen["train"] += len(labels)
            return torch.nn.functional.cross_entropy(self.net(images), labels)

        def validation_step(self, batch: Any, _: int) -> None:
            images, labels = batch
            self.seen["val"] += len(labels)
            self.log("val_loss", torch.nn.functional.cross_entropy(self.net(images), labels))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    train, val = photo_loader(backend), photo_loader(backend, split="val")
    module = Classifier()
    module.net(torch.zeros(1, 3, SIZE, SIZE))
    trainer = lightning.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(module, train_dataloaders=train, val_dataloaders=val)
    assert trainer.state.finished and trainer.current_epoch == 2
    assert module.seen["train"] == 2 * len(train.sampler)
    assert module.seen["val"] >= len(val.sampler)
    for held in (train, val):
        held.close()
