"""``DALIIterator``: the DALI loader for an existing training loop, no Hydra needed.

Drop it in where a ``torch.utils.data.DataLoader`` was::

    loader = DALIIterator("/data/imagenet/train", batch_size=256, train=True)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

Keyword defaults are the config defaults (they are read from the same dataclasses), and
:meth:`DALIIterator.from_config` builds one from a composed Hydra config instead.
"""

from __future__ import annotations

import os

from omegaconf import DictConfig

from dali_pipes.backends.dali import DaliLoader
from dali_pipes.config import loader_spec
from dali_pipes.dist import placement
from dali_pipes.errors import ConfigError
from dali_pipes.sources import discover_folder
from dali_pipes.spec import (
    AugmentSpec,
    DaliBackend,
    DataSpec,
    EvalAugment,
    LoaderSpec,
    SamplingSpec,
    TrainAugment,
)

_AUG = AugmentSpec()


class DALIIterator(DaliLoader):
    """A DALI loader over an ImageFolder tree with the DataLoader batch contract.

    ``root`` holds ``<class>/<image>`` folders. ``train=True`` applies random-resized-crop
    + flip at ``image_size`` and shuffles; ``train=False`` resizes the shorter side to
    ``resize_size`` and centre-crops ``image_size``, in order. ``device`` is ``auto``
    (GPU when usable), ``gpu`` or ``cpu``. ``rank``/``world_size`` default to torchrun's.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        batch_size: int = DataSpec.batch_size,
        train: bool = True,
        device: str = DaliBackend.device,
        image_size: int = TrainAugment.size,
        resize_size: int = EvalAugment.resize,
        scale: tuple[float, float] = TrainAugment.scale,
        ratio: tuple[float, float] = TrainAugment.ratio,
        flip_prob: float = TrainAugment.flip_prob,
        mean: tuple[float, float, float] = _AUG.mean,
        std: tuple[float, float, float] = _AUG.std,
        dtype: str = _AUG.dtype,
        channels_last: bool = _AUG.channels_last,
        drop_last: bool = DataSpec.drop_last,
        shuffle: bool | None = None,
        seed: int = SamplingSpec.seed,
        num_threads: int | None = DaliBackend.num_threads,
        prefetch_queue_depth: int = DaliBackend.prefetch_queue_depth,
        hw_decoder_load: float = DaliBackend.hw_decoder_load,
        on_error: str = DataSpec.on_error,
        max_pixels: int = DataSpec.max_pixels,
        exclude: str | None = DataSpec.exclude,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        where = placement()
        augment = AugmentSpec(
            train=TrainAugment(size=image_size, scale=scale, ratio=ratio, flip_prob=flip_prob),
            val=EvalAugment(resize=resize_size, crop=image_size),
            mean=mean,
            std=std,
            dtype=dtype,
            channels_last=channels_last,
        )
        sampling = SamplingSpec(
            seed=seed,
            shuffle=train if shuffle is None else shuffle,
            drop_last=drop_last,
            rank=where.rank if rank is None else rank,
            world_size=where.world_size if world_size is None else world_size,
        )
        backend = DaliBackend(
            device=device,
            num_threads=num_threads,
            prefetch_queue_depth=prefetch_queue_depth,
            hw_decoder_load=hw_decoder_load,
        )
        # Validates these with the config's messages.
        DataSpec(batch_size=batch_size, on_error=on_error, max_pixels=max_pixels)
        super().__init__(
            LoaderSpec(
                source=discover_folder(root, on_error=on_error, exclude=exclude),
                train=train,
                batch_size=batch_size,
                augment=augment,
                sampling=sampling,
                backend=backend,
                on_error=on_error,
                max_pixels=max_pixels,
            )
        )

    @classmethod
    def from_config(
        cls,
        cfg: DictConfig,
        split: str = "train",
        *,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> DaliLoader:
        """The DALI loader a composed config describes (``backend`` must be ``dali``)."""
        if cfg.backend.get("name") != "dali":
            raise ConfigError(
                "DALIIterator.from_config needs backend=dali, got "
                f"backend={cfg.backend.get('name')!r}; use dali_pipes.build_loader for others"
            )
        spec = loader_spec(cfg, split, rank=rank, world_size=world_size)
        if spec.cache is not None:
            raise ConfigError(
                f"data.cache={spec.cache} replaces the DALI pipeline with the decode-once "
                "loader; use dali_pipes.build_loader(cfg) for it"
            )
        return DaliLoader(spec)
