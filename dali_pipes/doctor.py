"""``python -m dali_pipes.doctor`` (any training config): how input-bound is training?

1. Runs the configured model's training step on synthetic batches already on the device:
   the rate training reaches when input costs nothing.
2. Runs the same step fed by the configured loader: achieved images/s and the share of
   step time spent waiting for data.
3. Tunes the loader one knob at a time (DALI: ``num_threads``, ``prefetch_queue_depth``,
   ``hw_decoder_load`` on a GPU; torch: ``num_workers``, ``prefetch_factor``), keeping a
   value only when it is faster, and writes the best settings as a backend config:
   ``<out_dir>/backend/<backend>_tuned.yaml``, used as
   ``python -m dali_pipes.train --config-dir <out_dir> backend=<backend>_tuned ...``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import yaml
from omegaconf import DictConfig
from torch import nn

from dali_pipes import cli
from dali_pipes.backends import Loader, create_loader
from dali_pipes.bench import environment
from dali_pipes.config import loader_spec, to_spec
from dali_pipes.dist import cpu_share
from dali_pipes.errors import DaliPipesError
from dali_pipes.loop import StepConfig, train_one_epoch
from dali_pipes.recipe import TrainerSpec, make_optimizer
from dali_pipes.spec import (
    BackendSpec,
    DaliBackend,
    LoaderSpec,
    SyntheticBackend,
    TorchBackend,
    require,
)
from dali_pipes.train import _build_model

log = logging.getLogger("dali_pipes.doctor")


@dataclass(frozen=True)
class DoctorSpec:
    """``doctor`` config node."""

    steps: int = 40  # timed training steps per measurement
    warmup_steps: int = 8
    tune: bool = True
    min_gain: float = 0.03  # a setting must be this much faster to replace the current one
    out_dir: str = "outputs/doctor"

    def __post_init__(self) -> None:
        require(self.min_gain >= 0, "doctor.min_gain", self.min_gain, "must be >= 0")
        require(self.steps >= 1, "doctor.steps", self.steps, "must be >= 1")
        require(self.warmup_steps >= 0, "doctor.warmup_steps", self.warmup_steps, ">= 0")


@dataclass(frozen=True)
class Rate:
    images_per_s: float
    data_wait: float  # share of wall time spent in next(loader)


class _Bench:
    """The model's training step, measured when fed by a given loader."""

    def __init__(self, cfg: DictConfig, spec: LoaderSpec, doctor: DoctorSpec) -> None:
        self.spec = spec
        self.doctor = doctor
        trainer = to_spec(cfg.trainer, TrainerSpec)
        probe = create_loader(replace(spec, backend=SyntheticBackend(device=spec.backend.device)))
        self.device = probe.device
        channels_last = trainer.use_channels_last(self.device)
        self.model: nn.Module = _build_model(cfg, probe.num_classes).to(self.device)
        if channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.optimizer = make_optimizer(self.model, trainer, spec.batch_size)
        autocast = trainer.autocast_dtype(self.device)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=autocast == torch.float16)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda _: 1.0)
        self.criterion = nn.CrossEntropyLoss()
        self.step = StepConfig(autocast, channels_last)
        probe.close()

    def rate(self, backend: BackendSpec) -> Rate:
        with create_loader(replace(self.spec, backend=backend)) as loader:
            self._run(loader, self.doctor.warmup_steps)
            samples, seconds, wait = self._run(loader, self.doctor.steps)
        return Rate(samples / seconds, wait / seconds)

    def _run(self, loader: Loader, steps: int) -> tuple[float, float, float]:
        """``steps`` training steps (over several epochs if the dataset is small)."""
        samples = seconds = wait = 0.0
        done = 0
        while done < steps:
            cfg = replace(self.step, max_steps=steps - done)
            stats = train_one_epoch(
                self.model,
                loader,
                self.criterion,
                self.optimizer,
                self.scheduler,
                self.scaler,
                cfg,
                "doctor",
            )
            if not stats.samples:
                break
            done += math.ceil(stats.samples / loader.batch_size)
            samples, seconds, wait = (
                samples + stats.samples,
                seconds + stats.seconds,
                wait + stats.data_wait,
            )
        return samples, seconds, wait


def _knobs(backend: BackendSpec, cores: int, gpu: bool) -> list[tuple[str, Sequence[Any]]]:
    counts = sorted({1, max(1, cores // 2), cores, cores + 1, 2 * cores})
    if isinstance(backend, DaliBackend):
        knobs: list[tuple[str, Sequence[Any]]] = [
            ("num_threads", counts),
            ("prefetch_queue_depth", [1, 2, 3, 4]),
        ]
        if gpu:
            knobs.append(("hw_decoder_load", [0.0, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0]))
        return knobs
    if isinstance(backend, TorchBackend):
        return [("num_workers", sorted({0, *counts})), ("prefetch_factor", [2, 4, 8])]
    return []


def tune(
    bench: _Bench, backend: BackendSpec, cores: int, min_gain: float
) -> tuple[BackendSpec, Rate, list[dict[str, Any]]]:
    """Coordinate descent over the backend's knobs: the best spec, its rate, every trial."""
    gpu = bench.device.type == "cuda"
    best, best_rate = backend, bench.rate(backend)
    trials = [{**asdict(backend), **asdict(best_rate)}]
    for knob, values in _knobs(backend, cores, gpu):
        for value in values:
            if value == getattr(best, knob):
                continue
            candidate = replace(best, **{knob: value})
            rate = bench.rate(candidate)
            trials.append({**asdict(candidate), **asdict(rate)})
            log.info(
                "  %s=%s: %.0f img/s, data wait %.0f%%",
                knob,
                value,
                rate.images_per_s,
                100 * rate.data_wait,
            )
            if rate.images_per_s > best_rate.images_per_s * (1 + min_gain):
                best, best_rate = candidate, rate
    return best, best_rate, trials


def write_tuned(backend: BackendSpec, out_dir: Path) -> Path:
    """A backend config file extending the backend's schema with the tuned values."""
    path = out_dir / "backend" / f"{backend.name}_tuned.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"defaults": [f"/schema/backend/{backend.name}@_here_", "_self_"], **asdict(backend)}
    path.write_text(
        "# Written by python -m dali_pipes.doctor. Use with:\n"
        f"#   python -m dali_pipes.train --config-dir {out_dir} backend={backend.name}_tuned ...\n"
        + yaml.safe_dump(body, sort_keys=False)
    )
    return path


def run_doctor(cfg: DictConfig) -> dict[str, Any]:
    doctor = to_spec(cfg.doctor, DoctorSpec)
    spec = loader_spec(cfg, "train", rank=0, world_size=1)
    backend = spec.backend
    if isinstance(backend, SyntheticBackend):
        raise DaliPipesError("doctor measures a real loader: choose backend=dali or backend=torch")
    cores = cpu_share()
    bench = _Bench(cfg, spec, doctor)
    log.info("1/3 training step on synthetic on-device data")
    synthetic = bench.rate(SyntheticBackend(device=backend.device))
    log.info("2/3 training step fed by backend=%s", backend.name)
    fed = bench.rate(backend)
    report: dict[str, Any] = {
        **environment(),
        "model": cfg.model.name,
        "backend": asdict(backend),
        "batch_size": spec.batch_size,
        "synthetic_images_per_s": synthetic.images_per_s,
        "loader_images_per_s": fed.images_per_s,
        "loader_vs_synthetic": fed.images_per_s / synthetic.images_per_s,
        "data_wait": fed.data_wait,
    }
    if doctor.tune:
        log.info("3/3 tuning backend=%s", backend.name)
        best, best_rate, trials = tune(bench, backend, cores, doctor.min_gain)
        path = write_tuned(best, Path(doctor.out_dir))
        report.update(
            tuned=asdict(best),
            tuned_images_per_s=best_rate.images_per_s,
            tuned_vs_synthetic=best_rate.images_per_s / synthetic.images_per_s,
            tuned_config=str(path),
            trials=trials,
        )
    out = Path(doctor.out_dir) / "doctor.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(summary(report))
    return report


def summary(report: dict[str, Any]) -> str:
    lines = [
        f"model {report['model']}, backend {report['backend']['name']} "
        f"(device {report['backend']['device']}), batch {report['batch_size']}",
        f"  synthetic on-device data : {report['synthetic_images_per_s']:.0f} img/s (the ceiling)",
        f"  fed by the loader        : {report['loader_images_per_s']:.0f} img/s "
        f"= {100 * report['loader_vs_synthetic']:.0f}% of the ceiling, "
        f"{100 * report['data_wait']:.0f}% of the time waiting for data",
    ]
    if "tuned" in report:
        changed = {k: v for k, v in report["tuned"].items() if report["backend"].get(k) != v}
        lines.append(
            f"  tuned                    : {report['tuned_images_per_s']:.0f} img/s "
            f"= {100 * report['tuned_vs_synthetic']:.0f}% of the ceiling "
            f"with {changed or 'no changes'}"
        )
        lines.append(f"  settings written to {report['tuned_config']}")
    return "\n".join(lines)


def main() -> None:
    cli.run(run_doctor, "doctor")


if __name__ == "__main__":
    # Run the package's module, not this __main__ copy of it: the config schemas that
    # dali_pipes.config registers are the package's classes, and a second copy of a
    # schema class would not match them.
    from dali_pipes import doctor as tool

    tool.main()
