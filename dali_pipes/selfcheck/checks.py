"""The self-check's checks, each returning one :class:`~dali_pipes.selfcheck.report.Result`
per comparison: measured figures against a bound of :mod:`dali_pipes.selfcheck.bounds`.

Batches are compared on the 0-255 scale (``augment.mean=0``, ``augment.std=1/255``) over
the photos shipped in :data:`dali_pipes.selfcheck.PHOTOS`, one batch of all of them, at a
fixed seed and epoch, so the CPU's figures are the same on every machine with the same
versions. What needs a GPU is reported as not run where there is none; its CPU
counterpart runs instead (the GPU graphs as their CPU twins).
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from dali_pipes.augment.auto.layout import KINDS
from dali_pipes.augment.auto.slots import SlotOp
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import create_loader
from dali_pipes.backends.base import has_views, views_of
from dali_pipes.backends.cache.gpu import DaliCachedLoader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.config.compose import compose_config
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.errors import DaliPipesError
from dali_pipes.selfcheck.bounds import (
    CACHE_GPU_VS_RAM,
    DALI_CPU_VS_TORCH,
    DALI_GPU_VS_CPU,
    EQUALIZE_RULE,
    GPU_POLICY_VS_CPU,
    OPERATION,
    Bound,
    figures,
    pipeline_bound,
)
from dali_pipes.selfcheck.graphs import check_graphs, gpu_graphs, presets
from dali_pipes.selfcheck.report import Result, Status
from dali_pipes.tools.measurement import gpu_used_bytes

RAW = (
    "augment.mean=[0,0,0]",
    "augment.std=[0.00392156862745098,0.00392156862745098,0.00392156862745098]",
)
EPOCH = 1
#: dali_pipes' DALI loader against DALI's own example pipeline on the same device, at
#: least (on the 2-core CPU machine it measured 1.3-1.5x: benchmarks/RESULTS.md): far below
#: means something is wrong, not that this machine is slow.
MIN_SPEED_VS_EXAMPLE = 0.5
_EQUALIZE = KINDS.index("equalize")


@dataclass(frozen=True)
class Setup:
    """What every check shares: the photos, a scratch folder, whether a GPU is there."""

    photos: Path
    work: Path
    gpu: bool
    quick: bool

    def spec(self, preset: str, backend: str, device: str, split: str, *extra: str) -> LoaderSpec:
        """A loader spec over the photos, one batch of all of them, 0-255 output."""
        overrides = [
            "data=folder",
            f"data.root={self.photos}",
            "data.batch_size=16",
            "seed=3",
            f"augment={preset}",
            *RAW,
            f"backend={backend}",
            f"backend.device={device}",
            *extra,
        ]
        if backend == "torch":
            overrides.append("backend.num_workers=0")
        return loader_spec(compose_config(overrides), split, rank=0, world_size=1)


def batches(loader: Any, epoch: int = EPOCH) -> torch.Tensor:
    """One epoch of ``loader`` as float32 on the CPU (the loader closed after); a batch of
    views as their values one after the other (they differ in size)."""
    with loader:
        loader.set_epoch(epoch)
        return torch.cat([flat(images).float().cpu() for images, _ in loader])


def flat(images: Any) -> torch.Tensor:
    """A batch's images as they are, or a batch of views flattened into one tensor."""
    if has_views(images):
        return torch.cat([view.flatten() for view in views_of(images)])
    return torch.as_tensor(images)


def compare(name: str, a: torch.Tensor, b: torch.Tensor, bound: Bound, note: str = "") -> Result:
    """``a`` against ``b`` within ``bound``: ok, or FAIL with the figures and the bound."""
    if a.shape != b.shape:
        return Result(name, "FAIL", f"shapes differ: {tuple(a.shape)} and {tuple(b.shape)}")
    measured = figures(a, b)
    status: Status = "ok" if bound.admits(measured) else "FAIL"
    detail = f"{measured} (bound {bound}){note}"
    return Result(name, status, detail, {"measured": measured._asdict(), "bound": bound._asdict()})


def not_run(name: str, why: str = "no GPU") -> Result:
    """A check that did not run here, and why."""
    return Result(name, "not run", why)


def timed(name: str, check: Callable[[], list[Result]]) -> Iterator[Result]:
    """The check's results with the time it took; an exception is a FAIL in one line."""
    start = time.perf_counter()
    try:
        results = check()
    except Exception as exc:  # a check that cannot finish has failed, in one line
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        results = [Result(name, "FAIL", f"{type(exc).__name__}: {message}")]
    seconds = (time.perf_counter() - start) / max(1, len(results))
    for result in results:
        yield replace(result, seconds=seconds)


# --------------------------------------------------------------------------- checks

#: A preset's own GPU graph among :func:`gpu_graphs`' cases ("augment=dino train").
PRESET = re.compile(r"augment=\S+ (train|val)")


def graphs(setup: Setup) -> list[Result]:
    """Every GPU graph defined and traced (no GPU needed), held against DALI's registry;
    with ``--quick``, each preset's train and val graph only (the variants of a preset's
    graph, a cache or a CPU decode before it, reuse its operators)."""
    if setup.quick:
        cases = [case for case in gpu_graphs(setup.photos) if PRESET.fullmatch(case.label)]
    else:
        shards = setup.work / "shards"
        if not shards.exists():
            from dali_pipes.tools.pack import run_pack

            overrides = ["data=folder", f"data.root={setup.photos}", f"out={shards}"]
            with contextlib.redirect_stdout(io.StringIO()):
                config = compose_config([*overrides, "pack.shard_size_mb=0.3"], config_name="pack")
                run_pack(config)
        cases = gpu_graphs(setup.photos, shards)
    checks = check_graphs(cases)
    bad = [check for check in checks if not check.ok]
    name = "GPU graphs defined and traced"
    if bad:
        shown = "; ".join(f"{c.label}: {c.problems[0]}" for c in bad[:3])
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return [Result(name, "FAIL", f"{len(bad)} of {len(checks)}: {shown}{more}")]
    ops = sum(len(check.graph.ops) for check in checks if check.graph is not None)
    return [
        Result(
            name,
            "ok",
            f"{len(checks)} graphs, {ops} operators, each on a device DALI implements it on",
            {"graphs": len(checks), "operators": ops},
        )
    ]


def decoders(setup: Setup) -> list[Result]:
    """The decoders on the evaluation crop (resize 256, centre crop 224): libjpeg-turbo
    in DALI against torchvision's, and nvJPEG against libjpeg-turbo."""
    cpu = batches(create_loader(setup.spec("imagenet", "dali", "cpu", "val")))
    reference = batches(create_loader(setup.spec("imagenet", "torch", "cpu", "val")))
    results = [compare("decode: DALI CPU vs torchvision", cpu, reference, DALI_CPU_VS_TORCH)]
    for fancy in (False, True):
        name = f"decode: nvJPEG vs libjpeg-turbo, fancy_upsampling={str(fancy).lower()}"
        if not setup.gpu:
            results.append(not_run(name))
            continue
        option = f"backend.fancy_upsampling={str(fancy).lower()}"
        gpu = batches(create_loader(setup.spec("imagenet", "dali", "gpu", "val", option)))
        results.append(compare(name, gpu, cpu, DALI_GPU_VS_CPU[fancy]))
    return results


def preset_cases(names: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """Every preset's training split (of ``names``; all shipped ones by default), and each
    distinct evaluation split once."""
    names = presets() if names is None else list(names)
    seen: dict[str, str] = {}
    for preset in sorted(
        names, key=lambda name: name != "imagenet"
    ):  # imagenet speaks for its kind
        val = to_spec(compose_config([f"augment={preset}"]).augment, AugmentSpec).val
        seen.setdefault(repr(val), preset)
    return [(preset, "train") for preset in names] + [(p, "val") for p in seen.values()]


def _reaches_equalize(spec: LoaderSpec) -> bool:
    ops = spec.augment.views(spec.train).ops
    return any(isinstance(op, SlotOp) and _EQUALIZE in op.kinds() for op in ops)


def _gpu_vs_twin(spec: LoaderSpec) -> tuple[Bound, bool]:
    """The bound of the GPU graph against its CPU twin (the decoders' difference, through
    the ops), and whether it is provisional (not yet measured on a GPU): for the policies,
    the GPU RandAugment test's, widened by Equalize's where it is reached."""
    decode = DALI_GPU_VS_CPU[False]
    if not any(isinstance(op, SlotOp) for op in spec.augment.views(spec.train).ops):
        return decode, False
    if _reaches_equalize(spec):
        return GPU_POLICY_VS_CPU.widen(OPERATION["Equalize"]), True
    return GPU_POLICY_VS_CPU, True


def augmentation(setup: Setup) -> list[Result]:
    """One batch of every preset: DALI's CPU graph and the GPU's graph (as its CPU twin)
    against the torch backend, and on a GPU, the GPU graph against its CPU twin."""
    results = []
    # --quick: two presets, composed alone (a composition costs more than their checks)
    cases = preset_cases(("imagenet", "randaugment") if setup.quick else None)
    for preset, split in cases:
        name = f"augment={preset} {split}"
        spec = setup.spec(preset, "dali", "cpu", split)
        views = spec.augment.views(spec.train)
        ops = [op.name for op in views.ops]
        bound = pipeline_bound(ops, shipped=True, cubic=views.cubic)
        if bound is None:
            results.append(not_run(name, f"no recorded bound for its ops {ops}"))
            continue
        reference = batches(create_loader(setup.spec(preset, "torch", "cpu", split)))
        cpu = batches(create_loader(spec))
        results.append(compare(f"{name}: DALI CPU vs torch", cpu, reference, bound))
        twin = batches(DaliLoader(spec, twin=True))
        equalizes = _reaches_equalize(spec)
        twin_bound = bound.widen(EQUALIZE_RULE) if equalizes else bound
        note = " (the GPU's equalize follows OpenCV's rule)" if equalizes else ""
        results.append(
            compare(f"{name}: GPU graph (CPU twin) vs torch", twin, reference, twin_bound, note)
        )
        gpu_name = f"{name}: DALI GPU vs its CPU twin"
        if not setup.gpu:
            results.append(not_run(gpu_name))
            continue
        gpu = batches(create_loader(setup.spec(preset, "dali", "gpu", split)))
        gpu_bound, provisional = _gpu_vs_twin(spec)
        note = " (provisional bound)" if provisional else ""
        results.append(compare(gpu_name, gpu, twin, gpu_bound, note))
    return results


def cache(setup: Setup) -> list[Result]:
    """``data.cache=gpu`` (DALI's graph on decoded images) against ``data.cache=ram``
    (torch on the same decoded images)."""
    ram = batches(create_loader(setup.spec("imagenet", "torch", "cpu", "train", "data.cache=ram")))
    twin_spec = setup.spec("imagenet", "dali", "cpu", "train", "data.cache=gpu")
    twin = batches(DaliCachedLoader(twin_spec, twin=True))
    ops = [op.name for op in twin_spec.augment.pipeline(True).ops]
    bound = pipeline_bound(ops, shipped=True)
    assert bound is not None
    results = [compare("data.cache=gpu's graph (CPU twin) vs data.cache=ram", twin, ram, bound)]
    name = "data.cache=gpu vs data.cache=ram"
    if not setup.gpu:
        return [*results, not_run(name)]
    gpu = batches(create_loader(setup.spec("imagenet", "dali", "gpu", "train", "data.cache=gpu")))
    return [*results, compare(name, gpu, ram, CACHE_GPU_VS_RAM)]


def _identical(name: str, gpu: Any, cpu: Any) -> Result:
    """Batches handed to the GPU against the same loader's on the CPU: the same pixels,
    labels, on the GPU."""
    cpu_images: list[torch.Tensor] = []
    cpu_labels: list[torch.Tensor] = []
    gpu_images: list[torch.Tensor] = []
    gpu_labels: list[torch.Tensor] = []
    with cpu, gpu:
        for loader, images, labels in (
            (cpu, cpu_images, cpu_labels),
            (gpu, gpu_images, gpu_labels),
        ):
            loader.set_epoch(EPOCH)
            for x, y in loader:
                images.append(x)
                labels.append(y)
    devices = {x.device.type for x in gpu_images} | {y.device.type for y in gpu_labels}
    if devices != {"cuda"}:
        return Result(name, "FAIL", f"batches on {sorted(devices)}, not cuda")
    a, b = torch.cat([x.cpu() for x in gpu_images]), torch.cat(cpu_images)
    worst = (a.float() - b.float()).abs().max().item()
    same = torch.equal(torch.cat([y.cpu() for y in gpu_labels]), torch.cat(cpu_labels))
    status: Status = "ok" if worst <= 1e-3 and same else "FAIL"  # 0-255: the same pixels
    return Result(
        name,
        status,
        f"largest difference {worst:.2g} grey levels (bound 0.001), "
        f"labels {'equal' if same else 'DIFFER'}",
        {"max": worst, "labels_equal": same},
    )


def handover(setup: Setup) -> list[Result]:
    """The CPU-made batches handed to the GPU: DALI's copy (dali-cpu) and the torch
    backend's CUDA prefetcher (pinned memory, a side stream)."""
    names = ("dali-cpu -> GPU: DALI's copy", "torch backend's CUDA prefetcher")
    if not setup.gpu:
        return [not_run(name) for name in names]
    dali = setup.spec("imagenet", "dali", "cpu", "train")
    torch_spec = setup.spec("imagenet", "torch", "cpu", "train")
    torch_gpu = setup.spec("imagenet", "torch", "gpu", "train")
    return [
        _identical(
            names[0], create_loader(replace(dali, output_device="cuda")), create_loader(dali)
        ),
        _identical(names[1], create_loader(torch_gpu), create_loader(torch_spec)),
    ]


def repeated_photos(setup: Setup, copies: int) -> Path:
    """The photos ``copies`` times over (a folder big enough to time)."""
    root = setup.work / f"photos-x{copies}"
    if not root.exists():
        for path in sorted(setup.photos.rglob("*.jpg")):
            for k in range(copies):
                target = root / path.parent.name / f"{path.stem}-{k}{path.suffix}"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    return root


def throughput(setup: Setup) -> list[Result]:
    """dali_pipes' DALI loader, DALI's own example pipeline and the synthetic ceiling,
    measured by ``python -m dali_pipes.bench`` on the photos repeated."""
    from dali_pipes.tools.bench import run_bench

    device = "gpu" if setup.gpu else "cpu"
    ours, example = ("dali-gpu", "dali-raw-gpu") if setup.gpu else ("dali-cpu", "dali-raw")
    images = (1024 if setup.gpu else 192) * (1 if setup.quick else 4)
    overrides = [
        "data=folder",
        f"data.root={repeated_photos(setup, 8)}",
        f"data.batch_size={64 if setup.gpu else 32}",
        f"bench.candidates=[{ours},{example},synthetic]",
        f"bench.min_images={images}",
        f"bench.warmup_images={images // 4}",
        f"bench.repeats={2 if setup.quick else 3}",
        f"bench.out={setup.work / 'bench.json'}",
        f"backend.device={device}",
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        report = run_bench(compose_config(overrides, config_name="bench"))
    rates = {row["name"]: row["images_per_s_median"] for row in report["results"]}
    ratio = rates[ours] / rates[example]
    status: Status = "ok" if ratio >= MIN_SPEED_VS_EXAMPLE else "FAIL"
    detail = (
        f"{ours} {rates[ours]:.0f} img/s, DALI's example pipeline {rates[example]:.0f} img/s "
        f"({ratio:.2f}x, bound >= {MIN_SPEED_VS_EXAMPLE}x), "
        f"synthetic {rates['synthetic']:.0f} img/s"
    )
    results = [Result(f"throughput on the {device.upper()}", status, detail, {"rates": rates})]
    if not setup.gpu:
        results.append(not_run("throughput on the GPU"))
    return results


def gpu_memory(setup: Setup) -> list[Result]:
    """GPU memory in use (DALI's pools included) after each of a few epochs: a leak grows
    every epoch, a pool settles after the first ones."""
    name = "GPU memory over epochs"
    if not setup.gpu:
        return [not_run(name)]
    epochs = 6 if setup.quick else 12
    before = gpu_used_bytes()
    samples = []
    with create_loader(setup.spec("randaugment", "dali", "gpu", "train")) as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for _ in loader:
                pass
            torch.cuda.synchronize()
            samples.append(gpu_used_bytes() - before)
    third = epochs // 3
    middle, last = max(samples[third : 2 * third]), max(samples[2 * third :])
    allowed = middle + max(0.05 * middle, 16 * 2**20)
    status: Status = "ok" if last <= allowed else "FAIL"
    mb = [round(s / 2**20) for s in samples]
    detail = (
        f"last {epochs - 2 * third} epochs' peak {last / 2**20:.0f} MB above the start (bound "
        f"{allowed / 2**20:.0f} MB: the epochs before + 5 % or 16 MB); per epoch {mb}"
    )
    return [Result(name, status, detail, {"mb_per_epoch": mb})]


#: The checks in the order they run and print.
CHECKS: tuple[tuple[str, Callable[[Setup], list[Result]]], ...] = (
    ("GPU graphs", graphs),
    ("decoders", decoders),
    ("augmentation presets", augmentation),
    ("data.cache", cache),
    ("hand-over to the GPU", handover),
    ("throughput", throughput),
    ("GPU memory", gpu_memory),
)


def gpu_available() -> bool:
    """A CUDA GPU that both torch and DALI see."""
    if not torch.cuda.is_available():
        return False
    from nvidia.dali import backend

    if backend.GetCUDADeviceCount() < 1:  # type: ignore[attr-defined]
        raise DaliPipesError(
            "torch sees a CUDA GPU but DALI sees none: check that nvidia-dali-cuda120 matches "
            "the driver (python -m dali_pipes.selfcheck reports both versions)"
        )
    return True
