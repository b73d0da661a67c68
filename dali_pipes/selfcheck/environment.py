"""What a bug report needs to know about the machine: versions, CUDA, the GPU, the cores,
and whether nvJPEG's hardware decoder (the A100/H100 JPEG engines) takes part."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from dali_pipes.selfcheck import nvml
from dali_pipes.tools.provenance import version

_PACKAGES = ("nvidia-dali-cuda120", "torch", "torchvision", "numpy", "numba")


def versions() -> dict[str, str | None]:
    """The versions of dali_pipes (the one running, also from a source tree) and of the
    installed packages it runs on."""
    found: dict[str, str | None] = {"python": platform.python_version(), "dali-pipes": version()}
    for name in _PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def _dali_cuda() -> dict[str, str | None]:
    """The CUDA DALI was built with, and the driver's CUDA version as DALI sees it."""
    from nvidia.dali import backend

    built = int(getattr(backend, "__cuda_version__", 0))  # 12986: 12.9.86
    driver = int(backend.GetCudaVersion())  # type: ignore[attr-defined]  # 13000: 13.0
    return {
        "dali_built_with": f"{built // 1000}.{built % 1000 // 100}.{built % 100}"
        if built
        else None,
        "driver_supports": f"{driver // 1000}.{driver % 1000 // 10}" if driver > 0 else None,
    }


def gpu() -> dict[str, Any] | None:
    """This process's GPU as torch and the driver describe it, or None without one. Not
    its UUID: a hardware serial has no place in a report meant for public bug trackers."""
    if not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return {
        "index": index,
        "name": props.name,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "compute_capability": f"{props.major}.{props.minor}",
        "visible_gpus": torch.cuda.device_count(),
    }


def _uuid(index: int) -> str:
    """The UUID of CUDA device ``index``, for finding it in NVML (never reported)."""
    return str(getattr(torch.cuda.get_device_properties(index), "uuid", ""))


def describe() -> dict[str, Any]:
    """The machine and the software, for the report."""
    from dali_pipes.tools.bench import environment as bench_environment

    with nvml.session() as lib:
        driver = nvml.driver_version(lib)
    shared = bench_environment()  # what bench records too: the commit, the processor
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m dali_pipes.selfcheck", *sys.argv[1:]]),
        "commit": shared["commit"],  # dali_pipes.tools.provenance: never another repository's
        "versions": versions(),
        "cuda": {
            "torch_runtime": torch.version.cuda,
            **_dali_cuda(),
            "driver": driver,
        },
        "gpu": gpu() or "none visible (torch.cuda.is_available() is False)",
        "cpu": {
            "cores": os.cpu_count(),
            "this_process": len(os.sched_getaffinity(0)),
            "model": shared["machine"]["processor"],
        },
        "platform": platform.platform(),
    }


def hardware_decoder(folder: Path, load: float, seconds: float = 2.0) -> str:
    """Whether nvJPEG sends JPEGs to the GPU's JPEG engines: ``folder``'s images decoded
    with ``mixed`` at ``hw_decoder_load=load`` for ``seconds`` while NVML's JPEG-engine
    utilisation is sampled (a GPU without engines, or a driver that does not report
    them, says so)."""
    from nvidia.dali import fn, pipeline_def, types

    info = gpu()
    if info is None:
        return "not checked: no GPU"

    @pipeline_def(batch_size=32, num_threads=max(1, len(os.sched_getaffinity(0))), device_id=0)
    def decode() -> Any:
        encoded, _ = fn.readers.file(file_root=str(folder), random_shuffle=False)
        return fn.decoders.image(
            encoded, device="mixed", output_type=types.RGB, hw_decoder_load=load
        )

    with nvml.session() as lib:
        handle = nvml.device(lib, _uuid(info["index"]))
        if nvml.jpeg_utilisation(lib, handle) is None:
            return "unknown: the driver reports no JPEG-engine utilisation for this GPU"
        pipe = decode(device_id=info["index"])
        pipe.build()
        busiest = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pipe.run()
            busiest = max(busiest, nvml.jpeg_utilisation(lib, handle) or 0)
        del pipe
    if busiest > 0:
        return f"in use (JPEG engines up to {busiest} % busy at hw_decoder_load={load})"
    return f"not in use (JPEG engines idle while decoding at hw_decoder_load={load})"
