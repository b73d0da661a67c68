"""A torchvision pipeline on DALI (CPU) and the torch backend gives torchvision's batches.

The reference is torchvision itself: ``DataLoader(ImageFolder(root, transform))``, PIL
decoding and PIL/tensor transforms as a user runs them. DALI is given the same ImageFolder
(``DALIIterator(ImageFolder(...))``) and the torch backend the same source and mapped spec;
each batch is compared with the reference's, in ImageFolder's order (the labels equal), on
the 0-255 scale. Deterministic pipelines (resize and centre crop, the conversions and
Normalize, v1 and v2) must agree within the parity bound of the crop
(:data:`~dali_pipes.selfcheck.bounds.DALI_CPU_VS_TORCH`: PIL's and DALI's antialiased
bilinear resizes differ by a grey level here and there, decoding is exact); the random
transforms at p=1 and p=0 (and their other fixed forms) within their op's bound on top.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.v2 as V
from torchvision.datasets import ImageFolder

from dali_pipes import DALIIterator
from dali_pipes.augment.from_torchvision import augment_spec
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import create_loader
from dali_pipes.backends.specs import LoaderSpec, TorchBackend
from dali_pipes.data.image_folder import folder_dataset_source
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.selfcheck.bounds import (
    COLOR_JITTER,
    CUBIC,
    DALI_CPU_VS_TORCH,
    EXACT,
    Bound,
    figures,
)

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 16

DETERMINISTIC: dict[str, Any] = {
    "v1 Resize CenterCrop ToTensor Normalize": T.Compose(
        [T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)]
    ),
    "v2 ToImage Resize CenterCrop ToDtype Normalize": V.Compose(
        [
            V.ToImage(),
            V.Resize(256),
            V.CenterCrop(224),
            V.ToDtype(torch.float32, scale=True),
            V.Normalize(MEAN, STD),
        ]
    ),
    "v2 Resize (h, w) CenterCrop ToImage, uint8": V.Compose(
        [V.Resize((200, 150)), V.CenterCrop((160, 120)), V.ToImage()]
    ),
    "v1 CenterCrop alone, padded where smaller, PILToTensor": T.Compose(
        [T.CenterCrop(420), T.PILToTensor()]
    ),
}


#: Bicubic resizes: DALI's antialiased cubic filter against torchvision's (:data:`CUBIC`).
BICUBIC: dict[str, Any] = {
    "v1 Resize(bicubic) CenterCrop ToTensor Normalize": T.Compose(
        [
            T.Resize(256, interpolation=T.InterpolationMode.BICUBIC),
            T.CenterCrop(224),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ]
    ),
    "v2 ToImage Resize((h, w), PIL bicubic) uint8": V.Compose(
        [V.ToImage(), V.Resize((200, 150), interpolation=3)]
    ),
}


def pixels(images: torch.Tensor, spec: AugmentSpec) -> torch.Tensor:
    """A batch on the 0-255 scale: (value * std + mean) * 255."""
    std = torch.tensor(spec.std).view(1, 3, 1, 1) * 255
    mean = torch.tensor(spec.mean).view(1, 3, 1, 1) * 255
    return images.float() * std + mean


def reference(dataset: ImageFolder) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """torchvision's own batches, in ImageFolder's order."""
    return iter(torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2))


def torch_backend(dataset: ImageFolder) -> Any:
    return create_loader(
        LoaderSpec(
            source=folder_dataset_source(dataset),
            train=False,
            batch_size=BATCH,
            augment=augment_spec(dataset.transform),
            sampling=SamplingSpec(shuffle=False),
            backend=TorchBackend(device="cpu", num_workers=2),
        )
    )


def compare(
    dataset: ImageFolder, bound: Bound, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each backend's batches against torchvision's, batch by batch, within ``bound``:
    both backends in step with one pass of the reference."""
    spec = augment_spec(dataset.transform)
    loaders = {
        "dali-cpu": DALIIterator(dataset, batch_size=BATCH, train=False, device="cpu"),
        "torch": torch_backend(dataset),
    }
    worst = dict.fromkeys(loaders, Bound(0.0, 0.0, 0.0))
    count = 0
    with ExitStack() as open_loaders:
        for loader in loaders.values():
            open_loaders.enter_context(loader)
        for (theirs, their_labels), *batches in zip(
            reference(dataset), *loaders.values(), strict=True
        ):
            for backend, (ours, labels) in zip(loaders, batches, strict=True):
                assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
                assert torch.equal(labels, their_labels)
                measured = figures(pixels(ours, spec), pixels(theirs, spec))
                assert bound.admits(measured), f"{backend} batch {count}: {measured} > {bound}"
                worst[backend] = Bound(*map(max, zip(worst[backend], measured, strict=True)))
            count += 1
        assert all(count == len(loader) for loader in loaders.values())
    with capsys.disabled():
        for backend in loaders:
            print(
                f"\ntorchvision parity {name}, {backend}: worst batch {worst[backend]} "
                f"(bound {bound})"
            )


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DETERMINISTIC))
def test_deterministic_pipelines_give_torchvisions_batches_on_dali_cpu_and_torch(
    name: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compare(ImageFolder(str(real_photos), DETERMINISTIC[name]), DALI_CPU_VS_TORCH, name, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BICUBIC))
def test_bicubic_resizes_give_torchvisions_batches_within_the_cubic_bound(
    name: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bound = Bound(*(max(a, b) for a, b in zip(DALI_CPU_VS_TORCH, CUBIC, strict=True)))
    compare(ImageFolder(str(real_photos), BICUBIC[name]), bound, name, capsys)


EVAL = [T.Resize(64), T.CenterCrop(56)]
#: The random transforms in forms that draw nothing that matters: p=1, p=0, fixed ranges.
FIXED: dict[str, tuple[list[Any], Bound]] = {
    "RandomHorizontalFlip(p=1)": ([T.RandomHorizontalFlip(1.0)], EXACT),
    "RandomHorizontalFlip(p=0)": ([T.RandomHorizontalFlip(0.0)], EXACT),
    "RandomVerticalFlip(p=1)": ([T.RandomVerticalFlip(1.0)], EXACT),
    "RandomVerticalFlip(p=0)": ([T.RandomVerticalFlip(0.0)], EXACT),
    "RandomGrayscale(p=1) on a tensor": ([V.ToImage(), V.RandomGrayscale(1.0)], EXACT),
    "RandomGrayscale(p=0)": ([V.RandomGrayscale(0.0)], EXACT),
    "Grayscale(3) on a PIL image": ([T.Grayscale(3)], EXACT),
    "RandomSolarize(128, p=1)": ([V.ToImage(), V.RandomSolarize(128, p=1.0)], EXACT),
    "RandomSolarize(128, p=0)": ([V.RandomSolarize(128, p=0.0)], EXACT),
    "GaussianBlur(7, sigma=1.5)": ([V.ToImage(), V.GaussianBlur(7, (1.5, 1.5))], EXACT),
    "RandomApply([ColorJitter(brightness=(1.3, 1.3)), VerticalFlip], p=1)": (
        [V.ToImage(), V.RandomApply([V.ColorJitter((1.3, 1.3)), V.RandomVerticalFlip(1.0)], 1.0)],
        COLOR_JITTER,
    ),
    "RandomApply([ColorJitter(0.4)], p=0)": ([T.RandomApply([T.ColorJitter(0.4)], 0.0)], EXACT),
    "RandAugment(num_ops=0)": ([T.RandAugment(num_ops=0)], EXACT),
    "RandomErasing(p=0) after Normalize": (
        [T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(p=0.0)],
        EXACT,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FIXED))
def test_random_transforms_at_p_1_and_p_0_give_torchvisions_batches(
    name: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On every fourth photo, 64 px: the random transform's fixed forms after the crop."""
    steps, op_bound = FIXED[name]
    tail = [] if any(isinstance(s, T.ToTensor) for s in steps) else [V.ToImage()]
    dataset = every_fourth_photo(real_photos, T.Compose([*EVAL, *steps, *tail]))
    compare(dataset, op_bound.widen(DALI_CPU_VS_TORCH), name, capsys)


def every_fourth_photo(root: Path, transform: Any) -> ImageFolder:
    """An ImageFolder of every fourth photo (by name) with ``transform``: cheap and varied."""
    return ImageFolder(
        str(root),
        transform,
        is_valid_file=lambda path: (
            zlib.crc32(Path(path).name.encode()) % 4 == 0 or "selfcheck" in path
        ),
        allow_empty=True,
    )
