"""The GPU's graphs run as their CPU twins, against the torch backend, on real photos.

A CPU twin is the GPU's graph -- DALI's resize, the auto-augment slots as DALI
conditionals over :mod:`dali_pipes.augment.dali_ops`, DALI's ``fn.equalize``, the decoder
with the GPU's options -- with every operator on the CPU
(:class:`~dali_pipes.backends.dali.graph.GraphDevices`). It runs the GPU path's logic on a
machine without a GPU, so only the operators' device implementations (and nvJPEG) stay
for a GPU to exercise: ``python -m dali_pipes.selfcheck`` and the ``gpu`` tests.

Every preset's twin (train and val; the self-supervised presets' views in
tests/parity/test_view_parity.py), and ``data.cache=gpu``'s twin, must keep the per-op
bounds of :mod:`dali_pipes.selfcheck.bounds` against the torch backend. One difference is
by design: the GPU graph's equalize is DALI's, which builds its lookup table by OpenCV's
rule, not PIL's (torchvision's). So the reference here is the torch backend with
torchvision's ``equalize`` replaced by :func:`equalize_as_dali` (OpenCV's rule, shown
below to be exactly what ``fn.equalize`` computes); the rule's own effect on the batches
is printed (benchmarks/RESULTS.md records it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from conftest import BUNDLED_PHOTOS
from torchvision.io import decode_jpeg, read_file

from dali_pipes.augment.auto.layout import KINDS
from dali_pipes.augment.auto.slots import SlotOp
from dali_pipes.backends import create_loader
from dali_pipes.backends.cache.gpu import DaliCachedLoader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.config.compose import compose_config
from dali_pipes.config.specs import loader_spec
from dali_pipes.selfcheck.bounds import Difference, pipeline_bound
from dali_pipes.selfcheck.checks import preset_cases

RAW = [
    "augment.mean=[0,0,0]",
    "augment.std=[0.00392156862745098,0.00392156862745098,0.00392156862745098]",
]
EQUALIZE = KINDS.index("equalize")
#: The epoch each preset runs: one where its resolution schedule is between its ends.
EPOCH = {"ffcv": 70}
#: Large-scale jitter's 1024 px crops at 384, DETR's 480-800 px sides at 256-320: the same
#: graphs, a fraction of the pixels.
SMALLER = {
    "lsj": ["augment.train.crop.size=384", "augment.val.crop.size=384"],
    "detr": [
        "augment.train.crop.min_size=[256,320]",
        "augment.train.crop.max_size=512",
        "augment.train.crop.crop_sizes=[256]",
        "augment.train.crop.crop_range=[192,256]",
        "augment.val.crop.min_size=320",
        "augment.val.crop.max_size=512",
    ],
}


def equalize_as_dali(image: torch.Tensor) -> torch.Tensor:
    """OpenCV's ``equalizeHist`` per channel of a uint8 ``[C, H, W]`` image: the lookup
    table ``round(255 * (cdf(v) - cdf(lowest)) / (n - cdf(lowest)))`` in float32, 0 at the
    lowest value present, a flat channel left as it is."""
    out = torch.empty_like(image)
    for c, channel in enumerate(image):
        hist = torch.bincount(channel.flatten().long(), minlength=256).numpy()
        lowest = int(np.flatnonzero(hist)[0])
        if hist[lowest] == channel.numel():
            out[c] = channel
            continue
        scale = np.float32(255) / np.float32(channel.numel() - hist[lowest])
        cdf = (np.cumsum(hist) - hist[lowest]).astype(np.float32)
        table = np.clip(np.rint(cdf * scale), 0, 255).astype(np.uint8)
        table[: lowest + 1] = 0
        out[c] = torch.from_numpy(table)[channel.long()]
    return out


def test_dalis_equalize_is_opencvs_rule_exactly_on_real_photos() -> None:
    """What the twins' reference assumes: ``fn.equalize`` (on the CPU, as in the twin)
    equals :func:`equalize_as_dali` on every value; torchvision's rule is far from it."""
    from nvidia.dali import fn, pipeline_def

    crops = []
    for path in sorted(BUNDLED_PHOTOS.rglob("*.jpg")):
        image = decode_jpeg(read_file(str(path)))
        crops.append(F.center_crop(F.resize(image, [160]), [160, 160]))
    hwc = [crop.permute(1, 2, 0).contiguous().numpy() for crop in crops]

    @pipeline_def(batch_size=len(hwc), num_threads=1, device_id=None)
    def equalize() -> Any:
        return fn.equalize(fn.external_source(source=lambda: hwc, batch=True, layout="HWC"))

    pipe = equalize()
    pipe.build()
    (out,) = pipe.run()
    rule_apart = 0.0
    for k, crop in enumerate(crops):
        dali = torch.from_numpy(np.array(out.at(k))).permute(2, 0, 1)
        assert torch.equal(dali, equalize_as_dali(crop)), f"photo {k}"
        rule_apart = max(rule_apart, (dali.float() - F.equalize(crop).float()).abs().mean().item())
    assert rule_apart > 2.0  # the rules differ: the swap in the reference is not a no-op


def spec(root: Path, preset: str, backend: str, split: str) -> LoaderSpec:
    """Every photo of the 13 shipped ones; every other one of the 213 shared ones (rank 0
    of 2: half the suite's time, the same kinds of photo)."""
    overrides = [
        "data=folder",
        f"data.root={root}",
        f"augment={preset}",
        *SMALLER.get(preset, []),
        *RAW,
        "data.batch_size=16",
        "seed=3",
        f"backend={backend}",
        "backend.device=cpu",
    ]
    if backend == "torch":
        overrides.append("backend.num_workers=0")  # equalize swapped in this process
    world = 2 if root != BUNDLED_PHOTOS else 1
    return loader_spec(compose_config(overrides), split, rank=0, world_size=world)


def images_of(loader: Any, epoch: int) -> Iterator[torch.Tensor]:
    """An epoch's images one by one (images may have sizes of their own): the loaders
    are compared image by image, in step, rather than as epochs joined into one tensor
    each (a whole-image preset's epoch of the shared photos is over a gigabyte)."""
    with loader:
        loader.set_epoch(epoch)
        for images, _ in loader:
            yield from images


def one_view(preset: str) -> bool:
    """A preset whose training split makes one image per sample: the self-supervised ones
    (several views) are compared view by view in tests/parity/test_view_parity.py."""
    return compose_config([f"augment={preset}"]).augment.train.get("views") is None


@pytest.mark.parametrize(("preset", "split"), [c for c in preset_cases() if one_view(c[0])])
def test_each_presets_gpu_graph_run_as_its_cpu_twin_matches_torch(
    preset: str,
    split: str,
    real_photos: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    epoch = EPOCH.get(preset, 1)
    twin_spec = spec(real_photos, preset, "dali", split)
    pipeline = twin_spec.augment.pipeline(split == "train")
    equalizes = any(isinstance(op, SlotOp) and EQUALIZE in op.kinds() for op in pipeline.ops)
    twins: list[torch.Tensor] = []  # kept for the second reference, where there is one
    against_real = Difference()
    for twin, cached, real in zip(
        images_of(DaliLoader(twin_spec, twin=True), epoch),
        images_of(DaliCachedLoader(twin_spec, twin=True), epoch),
        images_of(create_loader(spec(real_photos, preset, "torch", split)), epoch),
        strict=True,
    ):
        # data.cache=gpu's graph on decoded images is the loader's graph after the same
        # (CPU) decode: its twin gives the very same batches.
        assert torch.equal(cached, twin)
        assert twin.shape == real.shape
        against_real.add(twin, real)
        if equalizes:
            twins.append(twin)
    measured = against_real.figures()
    rule = ""
    if equalizes:
        monkeypatch.setattr(F, "equalize", equalize_as_dali)
        against_reference = Difference()
        reference = images_of(create_loader(spec(real_photos, preset, "torch", split)), epoch)
        for twin, same in zip(twins, reference, strict=True):
            against_reference.add(twin, same)
        rule = f"; against torchvision's equalize: {measured}"
        measured = against_reference.figures()
    bound = pipeline_bound([op.name for op in pipeline.ops], shipped=real_photos == BUNDLED_PHOTOS)
    assert bound is not None
    with capsys.disabled():
        print(
            f"\ntwin {preset} {split} (epoch {epoch}, {against_real.values} values): "
            f"{measured} (bound {bound}){rule}"
        )
    assert bound.admits(measured), f"{measured} exceeds {bound}"
