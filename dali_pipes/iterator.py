"""``DALIIterator``: the DALI loader for an existing training loop, no Hydra needed.

Drop it in where a ``torch.utils.data.DataLoader`` was::

    loader = DALIIterator("/data/imagenet/train", batch_size=256, train=True)

It takes data as ``DataLoader`` takes a dataset: a folder, a ``.zip`` of one or an ``s3://``
URL, a data spec (``ParquetData(root=...)``, ``ShardData(root=...)``, a registered one), a
torchvision ``ImageFolder`` or ``CocoDetection``, a Hugging Face ``datasets.Dataset`` or any
object with the ``Source`` interface (:mod:`dali_pipes.data.given` opens each).
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

``augment="randaugment"`` (any ``conf/augment`` preset), a list of ops or a torchvision
pipeline (``transforms.Compose`` or ``transforms.v2.Compose``, mapped to the same ops:
docs/how-to/torchvision.md) picks the augmentation, and a torchvision ``ImageFolder`` may stand
for the root (its samples, classes and transform as they are:
``DALIIterator(ImageFolder(root, transform=...))``); a preset with batch ops (``"deit"``:
mixup/cutmix, random erasing) yields soft targets, and ``loader.batch_stage`` is that
stage as an object to call in a loop of one's own. A self-supervised preset
(``"simclr"``, ``"byol"``, ``"dino"``, ``"swav"``) yields ``(views, labels)``, ``views``
a list of ``[N, 3, H, W]`` tensors, globals first. Keyword defaults are the config
defaults (they are read from the same dataclasses and presets), and
:meth:`DALIIterator.from_config` builds one from a composed Hydra config instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig

from dali_pipes.augment import from_torchvision
from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.config.compose import augment_preset
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.coco_dataset import coco_dataset, coco_transforms
from dali_pipes.data.given import Opened, open_data, open_mixed
from dali_pipes.data.image_folder import is_folder_dataset
from dali_pipes.data.samplers import sampler_spec
from dali_pipes.data.specs import DataSpec, SamplingSpec
from dali_pipes.errors import ConfigError
from dali_pipes.runtime.distributed import ranks


class DALIIterator(DaliLoader):
    """A DALI loader over any image data with the DataLoader batch contract.

    Args:
        data: a folder of ``<class>/<image>`` folders (local, a ``.zip`` archive of one, or
            ``s3://``); a data spec (``FolderData``, ``ParquetData``, ``ShardData``,
            ``ZipData``, a registered one), which opens the split ``train`` asks for; a
            torchvision ``ImageFolder`` (its samples in its order, its classes, and its
            ``transform`` as ``augment``); a torchvision ``CocoDetection``, wrapped for v2
            or not (its ``ids`` order, its category ids as labels, its ``transforms`` as
            ``augment``); a Hugging Face ``datasets.Dataset`` with an image and a label
            column; or an object with the ``Source`` interface.
        batch_size: samples per batch on this process.
        train: the training split of ``augment``, shuffled; False: the evaluation split
            (resize the shorter side to ``resize_size``, centre-crop ``image_size``), in order.
        device: ``auto`` (the GPU when usable), ``gpu`` or ``cpu``.
        augment: a preset name (``"imagenet"``, ``"randaugment"``, ``"dino"``, ... --
            ``conf/augment/``),
            a list of training ops after the crop (``[{"op": "hflip"}, {"op":
            "randaugment", "magnitude": 9}]`` or op objects), a torchvision pipeline (which
            also sets the output's dtype, mean and std), or an
            :class:`~dali_pipes.augment.spec.AugmentSpec`; None: the ImageNet recipe.
        image_size, resize_size, scale, ratio, flip_prob: change those parameters of the
            crops and the flip (None keeps the preset's).
        mean, std, dtype, channels_last: the output's normalisation and format (None keeps
            the preset's).
        drop_last, shuffle, seed: as ``DataLoader`` and ``DistributedSampler`` take them
            (``shuffle`` None: ``train``).
        num_threads, prefetch_queue_depth, hw_decoder_load: DALI's (``backend.*``).
        on_error, max_pixels, exclude, read_timeout: bad input (``data.*``): ``raise``,
            ``skip`` (a substitute takes a bad file's slot) or ``drop`` (left out), the
            header size limit, a manifest of files to leave out
            (``python -m dali_pipes.scan``), the seconds one file's read may take.
            With a data spec, ``batch_size``, ``drop_last`` and these left at their
            defaults take the spec's values.
        rank, world_size: default to torchrun's.
        sampler: which samples a training epoch reads (``sampling=``): None, every one once;
            a name (``"class_balanced"``, ``"repeated"``); torch's ``WeightedRandomSampler``,
            whose weights and settings are taken as they are; timm's ``RepeatAugSampler``.
        weights, labels, epoch_size: with a list of datasets as ``data`` (each anything
            ``data`` takes), read them as one (``data=mix``): ``weights``, one per dataset,
            say how much of a training epoch each makes up (None: its size, each sample once);
            ``labels`` keeps their classes apart (``"separate"``), matches them by name
            (``"shared"``) or maps them onto a list of class names; ``epoch_size``: samples
            per training epoch (None: all of them).

    Returns:
        (as an iterable) ``(images, labels)`` batches: normalised ``[N, 3, H, W]`` tensors
        (``[N, 1, H, W]`` after a torchvision ``Grayscale()``) on the loader's device and
        int64 labels (soft targets with a preset's batch ops);
        with a preset's views, ``(views, labels)``: a list of such tensors, one per view.
    """

    def __init__(
        self,
        data: Any,
        *,
        batch_size: int = DataSpec.batch_size,
        train: bool = True,
        device: str = DaliBackend.device,
        augment: str | Sequence[Any] | AugmentSpec | Any | None = None,
        image_size: int | None = None,
        resize_size: int | None = None,
        scale: tuple[float, float] | None = None,
        ratio: tuple[float, float] | None = None,
        flip_prob: float | None = None,
        mean: tuple[float, float, float] | None = None,
        std: tuple[float, float, float] | None = None,
        dtype: str | None = None,
        channels_last: bool | None = None,
        drop_last: bool = DataSpec.drop_last,
        shuffle: bool | None = None,
        seed: int = SamplingSpec.seed,
        num_threads: int | None = DaliBackend.num_threads,
        prefetch_queue_depth: int = DaliBackend.prefetch_queue_depth,
        hw_decoder_load: float = DaliBackend.hw_decoder_load,
        on_error: str = DataSpec.on_error,
        max_pixels: int = DataSpec.max_pixels,
        exclude: str | None = DataSpec.exclude,
        read_timeout: float = DataSpec.read_timeout,
        rank: int | None = None,
        world_size: int | None = None,
        sampler: Any = None,
        weights: Sequence[float] | None = None,
        labels: str | Sequence[str] = "separate",
        epoch_size: int | None = None,
    ) -> None:
        keys = {"batch_size": batch_size, "drop_last": drop_last, "on_error": on_error}
        keys |= {"max_pixels": max_pixels, "exclude": exclude, "read_timeout": read_timeout}
        opened = _opened(data, "train" if train else "val", weights, labels, epoch_size, keys)
        crop: dict[str, Any] = {"image_size": image_size, "resize_size": resize_size}
        crop |= {"scale": scale, "ratio": ratio, "flip_prob": flip_prob}
        output = {"mean": mean, "std": std, "dtype": dtype, "channels_last": channels_last}
        super().__init__(
            LoaderSpec(
                source=opened.source,
                train=train,
                batch_size=opened.data.batch_size,
                augment=augment_spec(_dataset_transform(data, augment), **crop, **output),
                sampling=_sampling(train, shuffle, opened.data.drop_last, seed, rank, world_size),
                backend=DaliBackend(
                    device=device,
                    num_threads=num_threads,
                    prefetch_queue_depth=prefetch_queue_depth,
                    hw_decoder_load=hw_decoder_load,
                ),
                on_error=opened.data.on_error,
                max_pixels=opened.data.max_pixels,
                sampler=sampler_spec(sampler),
            )
        )
        if not isinstance(data, str | os.PathLike | DataSpec | list | tuple):
            self.dataset.given = data  # its attributes read through loader.dataset

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


def augment_spec(
    augment: str | Sequence[Any] | AugmentSpec | Any | None = None, **changes: Any
) -> AugmentSpec:
    """An :class:`AugmentSpec` from a preset name, a list of training ops, a torchvision
    pipeline or a spec, with :class:`DALIIterator`'s keyword changes applied (None leaves a
    value as it is; a torchvision pipeline takes ``channels_last`` alone)."""
    if from_torchvision.is_transform(augment):
        given = sorted(k for k, v in changes.items() if v is not None and k != "channels_last")
        if given:
            raise ConfigError(
                f"{', '.join(given)} given with a torchvision transform, which says them "
                "itself: change the transform instead"
            )
        return from_torchvision.augment_spec(
            augment, channels_last=bool(changes.get("channels_last"))
        )
    if isinstance(augment, AugmentSpec):
        base = augment
    elif isinstance(augment, str):
        base = augment_preset(augment)
    elif augment is None:
        base = AugmentSpec()
    else:
        base = AugmentSpec(train=SplitAugment(ops=list(augment)))
    train_crop, val_crop = dict(base.train.crop), dict(base.val.crop)
    train_ops = {label: dict(params) for label, params in base.train.ops.items()}
    if changes.get("image_size") is not None:
        train_crop["size"] = val_crop["size"] = changes["image_size"]
    if changes.get("resize_size") is not None:
        val_crop["resize"] = changes["resize_size"]
    for key in ("scale", "ratio"):
        if changes.get(key) is not None:
            train_crop[key] = changes[key]
    if changes.get("flip_prob") is not None:
        flips = [label for label, params in train_ops.items() if params["op"] == "hflip"]
        if not flips:
            raise ConfigError(
                f"flip_prob={changes['flip_prob']!r} is invalid: the training ops have no "
                "hflip; add {'op': 'hflip', 'p': ...} to augment instead"
            )
        for label in flips:
            train_ops[label]["p"] = changes["flip_prob"]
    kept = {
        key: changes[key] if changes.get(key) is not None else getattr(base, key)
        for key in ("mean", "std", "dtype", "channels_last")
    }
    return AugmentSpec(
        train=SplitAugment(
            crop=train_crop, ops=train_ops, batch=base.train.batch, views=base.train.views
        ),
        val=SplitAugment(
            crop=val_crop, ops=base.val.ops, batch=base.val.batch, views=base.val.views
        ),
        imports=base.imports,
        channels=base.channels,
        **kept,
    )


def _dataset_transform(root: Any, augment: Any) -> Any:
    """``augment``, or the transform of an ImageFolder or a CocoDetection given as
    ``root`` (not both); for a list of datasets, the one transform they all have (one
    pipeline reads a mix)."""
    if isinstance(root, list | tuple):
        each = [_dataset_transform(item, None) for item in root]
        if all(t is None for t in each):
            return augment
        if augment is not None or any(t is None or repr(t) != repr(each[0]) for t in each):
            raise ConfigError(
                "the datasets to mix have different transforms (or augment= is given too): "
                "one pipeline reads a mix; give each the same transform, or augment= alone"
            )
        return each[0]
    transform = getattr(root, "transform", None) if is_folder_dataset(root) else None
    kind = "ImageFolder"
    if transform is None and coco_dataset(root) is not None:
        transform, kind = coco_transforms(root), type(coco_dataset(root)).__name__
    if transform is None:
        return augment
    if augment is not None:
        raise ConfigError(f"augment= is given and the {kind} has a transform: give one of them")
    return transform


def _opened(
    data: Any,
    split: str,
    weights: Sequence[float] | None,
    labels: str | Sequence[str],
    epoch_size: int | None,
    keys: dict[str, Any],
) -> Opened:
    """``split`` of what ``DALIIterator`` was given: a list of datasets read as one mix, or
    one dataset; the mix's keywords given with one dataset are refused in one line (nothing
    is mixed there)."""
    if isinstance(data, list | tuple):
        return open_mixed(data, split, weights, labels, epoch_size, **keys)
    given = [k for k, v in (("weights", weights), ("epoch_size", epoch_size)) if v is not None]
    given += ["labels"] if labels != "separate" else []
    if given:
        raise ConfigError(
            f"{', '.join(given)} given with one dataset: they say how several are mixed; "
            "give a list of datasets, DALIIterator([a, b], weights=[...])"
        )
    return open_data(data, split, **keys)


def _sampling(
    train: bool,
    shuffle: bool | None,
    drop_last: bool,
    seed: int,
    rank: int | None,
    world_size: int | None,
) -> SamplingSpec:
    """The sampling of this process (``shuffle`` None: ``train``'s); rank and world size
    default to torchrun's."""
    where = ranks()
    return SamplingSpec(
        seed=seed,
        shuffle=train if shuffle is None else shuffle,
        drop_last=drop_last,
        rank=where.rank if rank is None else rank,
        world_size=where.world_size if world_size is None else world_size,
    )
