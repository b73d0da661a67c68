"""What every peer loader does, whatever its library: :class:`PeerTask`.

The same files (the split's list, in ImageFolder order), the same batch size and thread
count, the same crop (random-resized-crop, or resize + centre crop), flip probability and
normalisation, and the same hand-over: normalised float32 ``[N, 3, S, S]`` tensors and
int64 ``[N]`` labels, every sample once per epoch, the last batch partial unless
``drop_last``. Each peer draws its own random numbers, as its documentation does.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from dali_pipes.augment.geometry import ATTEMPTS, Geometry
from dali_pipes.augment.ops.crop import RandomResizedCrop, ResizeCenterCrop
from dali_pipes.augment.ops.flip import HorizontalFlip
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.interface import local_paths_of
from dali_pipes.errors import DaliPipesError

#: How to get the peers' packages, named in every "not installed" line.
INSTALL = "pip install 'dali-pipes[peers]'"


class PeerUnavailable(DaliPipesError):
    """A peer cannot run here (its package or a library it loads is missing): one line,
    which ``bench`` prints in the peer's row instead of failing."""


def need(module: str, peer: str) -> ModuleType:
    """Import ``module`` for ``peer``, or raise :class:`PeerUnavailable` saying how to
    install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerUnavailable(f"{peer}: {module} is not installed ({exc}); {INSTALL}") from None


@dataclass(frozen=True)
class PeerTask:
    """One split's loading work, as every peer must do it."""

    root: str  # the ImageFolder root the files are listed under
    files: tuple[str, ...]
    labels: tuple[int, ...]
    num_classes: int
    batch_size: int
    threads: int
    crop: RandomResizedCrop | ResizeCenterCrop
    flip: float  # probability of a horizontal flip (0: none)
    mean: tuple[float, float, float]  # on the 0..1 scale, as the augment config gives them
    std: tuple[float, float, float]
    drop_last: bool
    seed: int

    @classmethod
    def from_spec(cls, spec: LoaderSpec, threads: int, peer: str) -> PeerTask:
        """The task of ``spec``'s split (one process), on ``threads`` threads; a split a
        peer cannot realise (another crop, ops besides the flip) raises one line."""
        source = spec.source
        paths = local_paths_of(source)
        if paths is None:
            raise DaliPipesError(
                f"{peer} reads an image folder; use data=folder, imagenet or sample, "
                f"or leave {peer} out of bench.candidates"
            )
        pipeline = spec.augment.pipeline(spec.train)
        crop = pipeline.crop
        others = sorted({op.name for op in pipeline.ops if not isinstance(op, HorizontalFlip)})
        batch_ops = spec.augment.train.batch if spec.train else spec.augment.val.batch
        if not isinstance(crop, RandomResizedCrop | ResizeCenterCrop) or others or batch_ops:
            raise DaliPipesError(
                f"{peer} realises random-resized-crop or resize + centre crop and a flip, "
                f"but the pipeline is {crop.name} + {others + sorted(batch_ops)}; use "
                f"augment=imagenet or leave {peer} out of bench.candidates"
            )
        if isinstance(crop, RandomResizedCrop) and crop.size_at(0) != crop.size:
            raise DaliPipesError(f"{peer} has no resolution schedule: leave start_size unset")
        flips = [op.p for op in pipeline.ops if isinstance(op, HorizontalFlip)]
        return cls(
            root=getattr(source, "root", ""),
            files=paths,
            labels=tuple(int(v) for v in source.labels),
            num_classes=len(source.classes),
            batch_size=spec.batch_size,
            threads=threads,
            crop=crop,
            flip=flips[0] if flips else 0.0,
            mean=tuple(spec.augment.mean),  # type: ignore[arg-type]
            std=tuple(spec.augment.std),  # type: ignore[arg-type]
            drop_last=spec.sampling.drop_last,
            seed=spec.sampling.seed,
        )

    @property
    def size(self) -> int:
        """The output side, pixels."""
        return self.crop.size

    def batches(self) -> int:
        """Batches per epoch, honouring ``drop_last``."""
        n, b = len(self.files), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def geometry(self, height: int, width: int, rng: np.random.Generator) -> Geometry:
        """One sample's crop window, resize and output crop (torchvision's rules), with
        the peer's own random draws."""
        u = rng.random((1, 4 * ATTEMPTS))
        return self.crop.plan(np.array([[height, width]]), u, 0)

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 ``[N, H, W, 3]`` -> normalised float32 ``[N, 3, H, W]`` (contiguous)."""
        mean = torch.tensor([255 * m for m in self.mean]).view(1, 3, 1, 1)
        std = torch.tensor([255 * s for s in self.std]).view(1, 3, 1, 1)
        x = images.permute(0, 3, 1, 2).to(torch.float32, memory_format=torch.contiguous_format)
        return x.sub_(mean).div_(std)
