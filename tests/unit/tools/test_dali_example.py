"""The dali-raw peer (DALI's own ResNet-50 example pipeline) and its place in ``bench``.

The peer is a yardstick: these tests check it yields what dali_pipes' loaders yield (shape,
dtype, layout, ImageFolder labels) on real photos, and that ``bench`` reports the DALI
loader's ratio to it. No test asserts a speed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import gpu

from dali_pipes import compose_config
from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.sources import FolderSource
from dali_pipes.errors import DaliPipesError
from dali_pipes.tools.bench import run_bench
from dali_pipes.tools.dali_example import READER, ExampleLoader, example_pipeline

SIZE = 32
BATCH = 8
OPTIONS = DaliBackend(device="cpu", num_threads=1)


def _spec(root: Path, *overrides: str) -> LoaderSpec:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={root}",
            f"augment.train.crop.size={SIZE}",
            f"data.batch_size={BATCH}",
            *overrides,
        ]
    )
    return loader_spec(cfg, "train", rank=0, world_size=1)


def _check_epoch(loader: ExampleLoader, spec: LoaderSpec, device: str) -> None:
    seen = 0
    batches = 0
    for images, labels in loader:
        n = len(labels)
        assert images.shape == (n, 3, SIZE, SIZE) and images.dtype == torch.float32
        assert images.is_contiguous() and images.device.type == device
        assert labels.shape == (n,) and labels.dtype == torch.int64
        assert labels.device.type == device
        # normalised with the configured mean/std: 0..255 maps into these bounds
        lo = min((0 - m) / s for m, s in zip(spec.augment.mean, spec.augment.std, strict=True))
        hi = max((1 - m) / s for m, s in zip(spec.augment.mean, spec.augment.std, strict=True))
        assert lo - 1e-4 <= images.min().item() and images.max().item() <= hi + 1e-4
        assert 0 <= labels.min().item() and labels.max().item() < len(spec.source.classes)
        seen += n
        batches += 1
    assert seen == len(spec.source) and batches == len(loader) == math.ceil(seen / BATCH)


def test_peer_yields_contract_batches_on_real_photos(photos: Path) -> None:
    spec = _spec(photos)
    with ExampleLoader(spec, OPTIONS, device_id=None) as loader:
        for _ in range(2):  # every iter() is one whole epoch
            _check_epoch(loader, spec, "cpu")
        assert "crop + flip only" in loader.note and "num_threads=1" in loader.note
        assert "readers.file lists" not in loader.note, "DALI lists the files we list"


def test_peer_labels_are_the_image_folder_classes(photos: Path) -> None:
    """Each sample's label from DALI's reader is the class index of its file in our source
    (ImageFolder order), and one epoch reads every file once."""
    spec = _spec(photos)
    source = spec.source
    assert isinstance(source, FolderSource)
    index = {path: k for k, path in enumerate(source.files)}
    pipe = example_pipeline(spec, OPTIONS, device_id=None)
    size = int(pipe.reader_meta(READER)["epoch_size"])
    assert size == len(source)
    files: list[str] = []
    while len(files) < size:
        images, labels = pipe.run()
        for k in range(len(labels)):
            path = str(Path(source.root) / images[k].source_info())
            assert int(np.asarray(labels[k])[0]) == source.labels[index[path]], path
            files.append(path)
    assert sorted(files[:size]) == sorted(source.files)


def test_peer_refuses_a_crop_it_cannot_realise(photos: Path) -> None:
    spec = _spec(photos)
    centre = AugmentSpec(train=SplitAugment(crop={"op": "resize_center_crop", "size": SIZE}))
    with pytest.raises(DaliPipesError, match="leave dali-raw") as caught:
        ExampleLoader(replace(spec, augment=centre), OPTIONS, device_id=None)
    assert "\n" not in str(caught.value)


def test_peer_notes_the_ops_it_ignores(photos: Path) -> None:
    spec = _spec(photos, "augment=deit", f"augment.train.crop.size={SIZE}")
    with ExampleLoader(spec, OPTIONS, device_id=None) as loader:
        assert "ignores mixup, randaugment, random_erasing" in loader.note
        images, _ = next(iter(loader))
        assert images.shape == (BATCH, 3, SIZE, SIZE)


def test_bench_reports_dali_cpu_beside_its_peer(
    identity_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            f"augment.train.crop.size={SIZE}",
            "data.batch_size=4",
            "backend.num_threads=1",
            "bench.repeats=1",
            "bench.warmup_images=4",
            "bench.min_images=17",
            "bench.candidates=[dali-cpu,dali-raw,dali-raw-gpu]",
            f"bench.out={tmp_path / 'bench.json'}",
        ],
        config_name="bench",
    )
    report = run_bench(cfg)
    rows = {r["name"]: r for r in report["results"]}
    ours, peer = rows["dali-cpu"], rows["dali-raw"]
    assert ours["images_per_s_median"] > 0 and peer["images_per_s_median"] > 0
    assert ours["vs_peer"] == pytest.approx(
        ours["images_per_s_median"] / peer["images_per_s_median"]
    )
    assert peer["vs_peer"] == 1.0 and "DALI's ResNet-50 example" in peer["note"]
    assert "num_threads=1" in peer["note"], "the peer runs on the DALI loader's thread count"
    if not torch.cuda.is_available():
        assert rows["dali-raw-gpu"]["note"] == "skipped: no CUDA device"
    table = capsys.readouterr().out
    assert "× DALI example" in table and "| dali-raw |" in table


def test_bench_fails_before_measuring_when_the_peer_cannot_run(
    identity_tree: Path, tmp_path: Path
) -> None:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            "augment.train.crop=${augment.val.crop}",  # resize + centre crop
            "bench.candidates=[dali-cpu,dali-raw]",
            f"bench.out={tmp_path / 'bench.json'}",
        ],
        config_name="bench",
    )
    with pytest.raises(DaliPipesError, match="leave dali-raw"):
        run_bench(cfg)
    assert not (tmp_path / "bench.json").exists()


@gpu
def test_peer_on_the_gpu_yields_cuda_batches(photos: Path) -> None:
    spec = _spec(photos)
    options = DaliBackend(device="gpu", num_threads=2)
    with ExampleLoader(spec, options, device_id=torch.cuda.current_device()) as loader:
        _check_epoch(loader, spec, "cuda")
