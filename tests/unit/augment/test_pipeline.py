"""Augmentation as data: configuring op lists, user ops, determinism and resume, and the
ImageNet preset's batches unchanged by the redesign."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from conftest import BUNDLED_PHOTOS, TESTS
from helpers.warm import python

from dali_pipes import DALIIterator, build_loader, compose_config
from dali_pipes.augment import Pipeline
from dali_pipes.augment.geometry import random_resized_crop
from dali_pipes.augment.geometry_torch import apply_geometry
from dali_pipes.augment.keyed import uniforms
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.handover import Normalizer
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.sources import discover_folder
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import decode
from dali_pipes.image.resample import WindowResize
from dali_pipes.iterator import augment_spec

PHOTOS = BUNDLED_PHOTOS  # the 13 real photos shipped in the package, 3 classes
PLUGINS = TESTS / "plugins"


def pipeline(*overrides: str) -> Pipeline:
    return loader_spec(compose_config(["data=synthetic", *overrides]), "train").augment.pipeline(
        True
    )


def names(p: Pipeline) -> list[str]:
    return [op.name for op in p.ops]


# --------------------------------------------------------------------------- configuration


def test_the_readme_command_line_forms_pick_change_disable_and_add_ops() -> None:
    assert names(pipeline("augment=randaugment")) == ["hflip", "randaugment"]
    changed = pipeline("augment=randaugment", "augment.train.ops.randaugment.magnitude=12")
    assert changed.ops[1].magnitude == 12  # type: ignore[attr-defined]
    assert names(pipeline("augment=randaugment", "~augment.train.ops.hflip")) == ["randaugment"]
    assert names(pipeline("augment=randaugment", "augment.train.ops.hflip=null")) == ["randaugment"]
    added = pipeline("augment=imagenet", "+augment.train.ops.color_jitter={brightness: 0.4}")
    assert names(added) == ["hflip", "color_jitter"]
    assert added.ops[1].ranges[0] == (0.6, 1.4)  # type: ignore[attr-defined]
    labelled = pipeline("+augment.train.ops.strong_blur={op: gaussian_blur, sigma: 3}")
    assert names(labelled)[-1] == "gaussian_blur" and labelled.labels[-1] == "strong_blur"
    crop = pipeline("augment.train.crop.size=160").crop
    assert crop.size == 160 and crop.name == "random_resized_crop"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "+augment.train.ops.colour_jitter={}",
            r"^augment\.train\.ops\.colour_jitter: unknown op 'colour_jitter'; known ops: "
            r"autoaugment, color_jitter, gaussian_blur, grayscale, hflip, photometric_distort, "
            r"randaugment",
        ),
        (
            "+augment.train.ops.hflip.prob=0.3",
            r"^augment\.train\.ops\.hflip\.prob is not a parameter of hflip; its parameters are p$",
        ),
        ("augment.train.ops.hflip.prob=0.3", r"'augment\.train\.ops\.hflip\.prob'.*not in struct"),
        ("augment.train.ops.hflip.p=1.5", r"^augment\.train\.ops\.hflip\.p=1\.5 is invalid"),
        (
            "+augment.train.ops.randaugment={magnitude: 31}",
            r"^augment\.train\.ops\.randaugment\.magnitude=31 is invalid: expected a number "
            r">= 0 and <= 30",
        ),
        ("augment.train.crop.op=flip", r"^augment\.train\.crop: unknown crop 'flip'"),
        ("augment.val.crop.resize=100", r"^augment\.val\.crop\.resize=100 is invalid"),
    ],
)
def test_bad_ops_fail_at_composition_with_one_line_naming_the_key(
    override: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        compose_config(["augment=imagenet", override])
    assert "\n" not in str(info.value)


def test_the_command_line_reports_a_bad_op_in_one_line_before_touching_data(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [
            python(),
            "-m",
            "dali_pipes.train",
            "data=folder",
            f"data.root={tmp_path / 'nowhere'}",
            "+augment.train.ops.trivial_augment={}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("dali_pipes: error")]
    assert len(lines) == 1 and "augment.train.ops.trivial_augment: unknown op" in lines[0]
    assert "trivialaugment" in lines[0], "the known ops are listed"


def test_the_same_pipeline_from_yaml_and_from_python_compares_equal() -> None:
    cfg = compose_config(["data=synthetic", "augment=randaugment"])
    from_yaml = loader_spec(cfg, "train").augment
    from_python = augment_spec([{"op": "hflip"}, {"op": "randaugment", "mstd": 0.5}])
    assert from_yaml.train == from_python.train and from_yaml.val == from_python.val


# --------------------------------------------------------------------------- user ops


def test_an_op_registered_outside_the_package_is_used_by_name_on_every_backend(
    identity_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    results = {}
    for kind, backend in (("dali", "cpu"), ("torch", "cpu")):
        cfg = compose_config(
            [
                "data=folder",
                f"data.root={identity_tree}",
                f"backend={kind}",
                f"backend.device={backend}",
                "augment.train.crop.size=32",
                "augment.imports=[custom_ops]",
                "+augment.train.ops.random_invert={p: 1.0}",
                "augment.mean=[0,0,0]",
                "augment.std=[0.00392156862745098,0.00392156862745098,0.00392156862745098]",
            ]
        )
        with build_loader(cfg, "train") as loader:
            images = torch.cat([im for im, _ in loader])
        results[kind] = images
        blue = images[:, 2].mean(dim=(1, 2))
        assert torch.allclose(blue, torch.full_like(blue, 255 - 200), atol=2), "inverted"
    assert (results["dali"] - results["torch"]).abs().max() <= 1


# --------------------------------------------------------------------------- iterator


def test_dali_iterator_takes_a_preset_name_or_an_op_list(identity_tree: Path) -> None:
    preset = DALIIterator(
        identity_tree, device="cpu", augment="randaugment", image_size=32, batch_size=4
    )
    assert names(preset.spec.augment.pipeline(True)) == ["hflip", "randaugment"]
    images, labels = next(iter(preset))
    assert images.shape == (4, 3, 32, 32) and labels.dtype == torch.int64
    listed = DALIIterator(
        identity_tree,
        device="cpu",
        augment=[{"op": "grayscale", "p": 1.0}],
        image_size=32,
        batch_size=4,
    )
    assert names(listed.spec.augment.pipeline(True)) == ["grayscale"]
    images, _ = next(iter(listed))
    rgb = images * torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) + torch.tensor(
        [0.485, 0.456, 0.406]
    ).view(1, 3, 1, 1)
    assert (rgb[:, 0] - rgb[:, 2]).abs().max() < 1e-4, "grey: equal channels"
    with pytest.raises(ConfigError, match="flip_prob"):
        DALIIterator(identity_tree, device="cpu", augment=[{"op": "grayscale"}], flip_prob=0.2)


# --------------------------------------------------------------------------- determinism


def photo_batches(
    backend: str, augment: str, epoch: int, start_batch: int = 0, seed: int = 7
) -> list[torch.Tensor]:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={PHOTOS}",
            "data.batch_size=2",
            f"seed={seed}",
            f"augment={augment}",
            "+augment.train.ops.color_jitter={brightness: 0.4, hue: 0.1, p: 0.8}",
            "+augment.train.ops.gaussian_blur={kernel_size: 9, p: 0.5}",
            "augment.train.crop.size=64",
            f"backend={backend.split('-')[0]}",
            "backend.device=cpu",
            *(["backend.num_workers=0"] if backend == "torch" else []),
        ]
    )
    with build_loader(cfg, "train") as loader:
        loader.set_epoch(epoch, start_batch=start_batch)
        return [images.clone() for images, _ in loader]


@pytest.mark.parametrize("backend", ["dali-cpu", "torch"])
def test_same_seed_and_epoch_give_identical_batches_epochs_differ_and_resume_replays(
    backend: str,
) -> None:
    first = photo_batches(backend, "randaugment", epoch=1)
    again = photo_batches(backend, "randaugment", epoch=1)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    other = photo_batches(backend, "randaugment", epoch=2)
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))
    resumed = photo_batches(backend, "randaugment", epoch=1, start_batch=1)
    assert len(resumed) == len(first) - 1
    assert all(torch.equal(a, b) for a, b in zip(first[1:], resumed, strict=True))
    reseeded = photo_batches(backend, "randaugment", epoch=1, seed=8)
    assert not all(torch.equal(a, b) for a, b in zip(first, reseeded, strict=True))


# --------------------------------------------------------------------------- ImageNet preset


def _previous_recipe(
    root: Path, order: np.ndarray, epoch: int, seed: int, size: int
) -> list[torch.Tensor]:
    """The fixed recipe before ops were data, written out: crop windows from draws 1-40 of
    (seed, epoch, sample), the flip from draw 41, torchvision's crop, then the flip."""
    source = discover_folder(root)
    out = []
    for i in order:
        image = decode(source.files[i])
        u = uniforms(seed, epoch, np.array([i]), 41)
        hw = np.array([image.shape[-2:]])
        window = random_resized_crop(hw, u[:, :40].reshape(1, 10, 4), (0.08, 1.0), (3 / 4, 4 / 3))
        x, y, w, h = (int(v) for v in window[0])
        sample = apply_geometry(image, (x, y, w, h), (size, size), (0, 0), (size, size))
        out.append(F.horizontal_flip(sample) if u[0, 40] < 0.5 else sample)
    return out


def _previous_dali_recipe(
    root: Path, order: np.ndarray, epoch: int, seed: int, size: int, batch: int, aug: AugmentSpec
) -> list[torch.Tensor]:
    """The pre-redesign DALI graph, hand-written: decode the window, resize (the CPU
    graph's resize), mirror by the flip drawn 41st, normalise -- fed the same files in the
    same order."""
    from nvidia.dali import fn, pipeline_def, types

    source = discover_folder(root)
    batches = [order[k : k + batch] for k in range(0, len(order), batch)]
    feed = iter(batches)

    def inputs() -> tuple[Any, ...]:
        ids = next(feed)
        blobs = source.read(list(ids))
        sizes = np.array([[image.shape[-2], image.shape[-1]] for image in map(decode_blob, blobs)])
        u = uniforms(seed, epoch, ids, 41)
        draws = u[:, :40].reshape(-1, 10, 4)
        window = random_resized_crop(sizes, draws, (0.08, 1.0), (3 / 4, 4 / 3))
        scale = window[:, [3, 2]] / size
        return (
            blobs,
            np.ascontiguousarray(window[:, :2], dtype=np.float32),
            np.ascontiguousarray(window[:, 2:], dtype=np.float32),
            np.zeros((len(ids), 2), np.float32),
            np.ascontiguousarray(size * scale, dtype=np.float32),
            np.full((len(ids), 2), size, np.float32),
            (u[:, 40] < 0.5).astype(np.int32),
        )

    def decode_blob(blob: np.ndarray | DataError) -> torch.Tensor:
        from dali_pipes.image.decode import decode_bytes

        return decode_bytes(blob, "photo")

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None)
    def graph() -> Any:
        encoded, anchor, shape, roi_start, roi_end, out_size, flip = fn.external_source(
            source=inputs, num_outputs=7, batch=True
        )
        images = fn.decoders.image_slice(
            encoded,
            anchor,
            shape,
            normalized_anchor=False,
            normalized_shape=False,
            device="cpu",
            output_type=types.RGB,
            adjust_orientation=False,
        )
        # The resize is the CPU graph's since e7909da: DALI's filter compiled
        # (dali_pipes.image.resample, held to DALI's fn.resize by
        # tests/unit/image/test_resample.py);
        # what this test pins is the redesign's geometry, draws, flip and normalisation.
        images = fn.python_function(
            images,
            roi_start,
            roi_end,
            out_size,
            function=resize,
            batch_processing=True,
            output_layouts="HWC",
        )
        return fn.crop_mirror_normalize(
            images,
            mirror=flip,
            mean=[255 * m for m in aug.mean],
            std=[255 * s for s in aug.std],
            dtype=types.FLOAT,
        )

    resize = WindowResize(threads=2)
    pipe = graph()
    pipe.build()
    out = []
    for _ in batches:
        (images,) = pipe.run()
        out += [torch.from_numpy(np.array(images[j])) for j in range(len(images))]
    resize.close()
    return out


@pytest.mark.parametrize("backend", ["dali-cpu", "torch"])
def test_the_imagenet_preset_gives_the_batches_of_the_recipe_before_the_redesign(
    backend: str,
) -> None:
    seed, epoch, size, batch = 5, 3, 64, 4
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={PHOTOS}",
            f"data.batch_size={batch}",
            f"seed={seed}",
            "augment=imagenet",
            f"augment.train.crop.size={size}",
            f"backend={backend.split('-')[0]}",
            "backend.device=cpu",
            *(["backend.num_workers=0"] if backend == "torch" else []),
        ]
    )
    with build_loader(cfg, "train") as loader:
        loader.set_epoch(epoch)
        ours = [image for images, _ in loader for image in images]
        order = loader.sampler.indices(epoch)
        aug = loader.spec.augment
    if backend == "torch":
        norm = Normalizer(aug, torch.device("cpu"))
        theirs = [norm(x[None])[0] for x in _previous_recipe(PHOTOS, order, epoch, seed, size)]
    else:
        theirs = _previous_dali_recipe(PHOTOS, order, epoch, seed, size, batch, aug)
    assert len(ours) == len(theirs) == len(order)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b), "bit-identical to the previous recipe"


def test_an_ops_parameters_depend_on_seed_epoch_and_sample_not_on_the_batch() -> None:
    spec = pipeline("augment=autoaugment", "+augment.train.ops.color_jitter={hue: 0.2}")
    sizes = [[300, 400]] * 6
    whole = spec.draw(sizes, np.arange(6), seed=1, epoch=2)
    single = spec.draw(sizes[:1], [4], seed=1, epoch=2)
    for k in range(len(spec.ops)):
        assert whole.row(k, 4).keys() == single.row(k, 0).keys()
        for name, value in whole.row(k, 4).items():
            assert np.array_equal(value, single.row(k, 0)[name]), name
