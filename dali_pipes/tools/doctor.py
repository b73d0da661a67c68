"""``python -m dali_pipes.doctor`` (any training config): how input-bound is training?

1. Runs the configured task's training step (``task=``: a classifier, a detector, a
   segmenter) on batches already on the device: synthetic ones, or for data with boxes or
   masks the loader's first batch replayed. That is the rate training reaches when input
   costs nothing.
2. Runs the same step fed by the configured loader: achieved images/s and the share of
   step time spent waiting for data.
3. Measures every placement this machine has -- where decoding runs and where the model
   trains: on a CPU-only machine (or with ``trainer.device=cpu``) DALI on the CPU and the
   torch backend feeding a CPU model; with a GPU, DALI on the GPU, DALI on the CPU and the
   torch backend feeding a GPU model -- and says which to use: the fastest, which keeps the
   configured one unless another is more than ``min_gain`` faster, and whether it keeps
   the model fed (at least :data:`FED_SHARE` of the on-device ceiling).
4. Tunes the loader one knob at a time (the backend's own
   :meth:`~dali_pipes.backends.specs.BackendSpec.knobs`: DALI's ``num_threads``,
   ``prefetch_queue_depth``, ``hw_decoder_load`` on a GPU; torch's ``num_workers``,
   ``prefetch_factor``), keeping a
   value only when it is faster, and writes the best settings as a backend config:
   ``<out_dir>/backend/<backend>_tuned.yaml``, used as
   ``python -m dali_pipes.train --config-dir <out_dir> backend=<backend>_tuned ...``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import yaml
from omegaconf import DictConfig
from torch import nn

from dali_pipes.backends import Loader, create_loader
from dali_pipes.backends.specs import (
    BackendSpec,
    DaliBackend,
    LoaderSpec,
    SyntheticBackend,
    TorchBackend,
)
from dali_pipes.config import cli
from dali_pipes.config.loaders import devices_of
from dali_pipes.config.schemas import DoctorSpec
from dali_pipes.config.specs import loader_spec, one_view, to_spec
from dali_pipes.data.files import write_text
from dali_pipes.data.interface import Annotated
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.devices import Devices, output_device_for, resolve_devices
from dali_pipes.runtime.distributed import cpu_share
from dali_pipes.tools.advice import doctor_advice
from dali_pipes.tools.bench import environment
from dali_pipes.tools.charts import timeline_chart, trials_chart
from dali_pipes.tools.doctor_report import summary
from dali_pipes.train.loop import EpochStats, StepConfig, train_one_epoch
from dali_pipes.train.models import build_model
from dali_pipes.train.optimizers import make_optimizer
from dali_pipes.train.state import trainer_spec
from dali_pipes.train.tasks import make_task

log = logging.getLogger("dali_pipes.doctor")

#: A placement "keeps the model fed" when it trains at this share of the on-device ceiling.
FED_SHARE = 0.9


@dataclass(frozen=True)
class Rate:
    """A measured training step rate, and the share of its time spent waiting for data."""

    images_per_s: float
    data_wait: float  # share of wall time spent in next(loader)


class Replayed:
    """One batch held on the model's device and handed out ``steps`` times per pass: input
    that costs nothing, with the loader's own images and targets."""

    def __init__(self, batch: Any, device: torch.device, batch_size: int, steps: int) -> None:
        self.batch, self.device, self.batch_size, self.steps = batch, device, batch_size, steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[Any]:
        for _ in range(self.steps):
            yield self.batch


class _Bench:
    """The model's training step on ``device``, measured when fed by a given loader."""

    def __init__(
        self, cfg: DictConfig, spec: LoaderSpec, doctor: DoctorSpec, device: torch.device
    ) -> None:
        self.spec = spec
        self.doctor = doctor
        self.device = device
        trainer = trainer_spec(cfg.trainer)
        channels_last = trainer.use_channels_last(device)
        num_classes = len(spec.source.classes)
        self.model: nn.Module = build_model(cfg, num_classes).to(device)
        if channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.optimizer = make_optimizer(self.model, trainer, spec.batch_size)
        autocast = trainer.autocast_dtype(device)
        self.scaler = torch.amp.GradScaler(device.type, enabled=autocast == torch.float16)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda _: 1.0)
        self.task = make_task(cfg, trainer, num_classes)
        self.step = StepConfig(autocast, channels_last)

    @property
    def replays(self) -> bool:
        """Whether the ceiling replays a loader batch (data with boxes or masks)."""
        return isinstance(self.spec.source, Annotated)

    def ceiling(self) -> Rate:
        """The step on batches already on the model's device: synthetic ones, or for data
        with boxes or masks (whose targets random pixels cannot carry) the loader's first
        batch replayed."""
        if self.replays:
            with self._loader(self.spec.backend) as loader:
                batch = next(iter(loader))
            steps = self.doctor.warmup_steps + self.doctor.steps
            replayed = Replayed(batch, self.device, self.spec.batch_size, steps)
            self._run(replayed, self.doctor.warmup_steps)
            samples, seconds, wait = self._run(replayed, self.doctor.steps)
            return Rate(samples / seconds, wait / seconds)
        synthetic = SyntheticBackend(device="gpu" if self.device.type == "cuda" else "cpu")
        return self.rate(synthetic, output_device=None)

    def rate(
        self,
        backend: BackendSpec,
        timeline: list[tuple[float, float]] | None = None,
        **changes: Any,
    ) -> Rate:
        """Images/s and data wait of the step fed by ``backend`` (``changes``: other
        :class:`LoaderSpec` fields, e.g. ``output_device``); each timed step's (data wait,
        step time) appended to ``timeline`` when given."""
        with self._loader(backend, **changes) as loader:
            self._run(loader, self.doctor.warmup_steps)
            samples, seconds, wait = self._run(loader, self.doctor.steps, timeline)
        return Rate(samples / seconds, wait / seconds)

    def _loader(self, backend: BackendSpec, **changes: Any) -> Loader:
        """The configured loader with ``backend`` (and ``changes``), on the model's device."""
        loader = create_loader(replace(self.spec, backend=backend, **changes))
        if loader.device != self.device:
            loader.close()
            raise DaliPipesError(
                f"backend={backend.name} device={backend.device} hands batches over on "
                f"{loader.device}, not on the model's {self.device}"
            )
        return loader

    def _run(
        self,
        loader: Loader | Replayed,
        steps: int,
        timeline: list[tuple[float, float]] | None = None,
    ) -> tuple[float, float, float]:
        """``steps`` training steps (over several epochs if the dataset is small)."""
        samples = seconds = wait = 0.0
        done = 0
        while done < steps:
            cfg = replace(self.step, max_steps=steps - done)
            stats = train_one_epoch(
                self.model,
                loader,
                self.task,
                self.optimizer,
                self.scheduler,
                self.scaler,
                cfg,
                "doctor",
                EpochStats(timeline=timeline),
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


def tune(
    bench: _Bench, backend: BackendSpec, cores: int, min_gain: float
) -> tuple[BackendSpec, Rate, list[dict[str, Any]]]:
    """Coordinate descent over the backend's knobs: the best spec, its rate, every trial."""
    gpu = bench.device.type == "cuda"
    best, best_rate = backend, bench.rate(backend)
    trials = [{**asdict(backend), **asdict(best_rate)}]
    for knob, values in backend.knobs(cores, gpu):
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


@dataclass(frozen=True)
class Candidate:
    """One placement: a backend (with its device) feeding a model on ``trainer_device``."""

    backend: BackendSpec
    trainer_device: str  # cuda | cpu

    @property
    def name(self) -> str:
        """The placement in words: where batches are made and where the model trains."""
        model = "gpu" if self.trainer_device == "cuda" else "cpu"
        return f"{self.backend.placement} -> {model} model"

    @property
    def overrides(self) -> str:
        """The command-line overrides that select this placement."""
        return (
            f"backend={self.backend.name} backend.device={self.backend.device} "
            f"trainer.device={self.trainer_device}"
        )


def candidates(configured: BackendSpec, gpu: bool) -> list[Candidate]:
    """The placements to measure for a model on the GPU (``gpu``) or on the CPU; each
    backend keeps the configured options when it is the configured backend. (The torch
    backend decodes in CPU workers either way; on the GPU it normalises there.)"""

    def backend(kind: type[BackendSpec], device: str) -> BackendSpec:
        if isinstance(configured, kind):
            return replace(configured, device=device)
        return kind(device=device)

    if gpu:
        return [
            Candidate(backend(DaliBackend, "gpu"), "cuda"),
            Candidate(backend(DaliBackend, "cpu"), "cuda"),
            Candidate(backend(TorchBackend, "gpu"), "cuda"),
        ]
    return [
        Candidate(backend(DaliBackend, "cpu"), "cpu"),
        Candidate(backend(TorchBackend, "cpu"), "cpu"),
    ]


def _pick(rows: list[dict[str, Any]], min_gain: float) -> dict[str, Any] | None:
    """The fastest placement; one within ``min_gain`` of it that comes earlier (the
    configured placement comes first) wins, so noise never moves a working setup."""
    measured = [r for r in rows if r["images_per_s"] is not None]
    if not measured:
        return None
    best = max(r["images_per_s"] for r in measured)
    return next(r for r in measured if r["images_per_s"] * (1 + min_gain) >= best)


def measure_placements(
    cfg: DictConfig,
    spec: LoaderSpec,
    doctor: DoctorSpec,
    configured: tuple[_Bench, Rate, Rate],
) -> dict[str, Any]:
    """Every placement this machine has, measured with the configured model: the rows,
    the model's ceiling there and the recommendation (see the module docstring).

    ``configured``: the bench of the configured placement, its ceiling and its rate, reused
    for the candidate that is the configured placement (and its model device)."""
    bench, ceiling, fed = configured
    trainer_device = str((cfg.get("trainer") or {}).get("device", "auto"))
    gpu = trainer_device != "cpu" and torch.cuda.is_available()
    model = resolve_devices("auto", "cuda" if gpu else "cpu", quiet=True).model
    if bench.device != model:
        bench = _Bench(cfg, spec, doctor, model)
        ceiling = bench.ceiling()
    mine = resolve_devices(spec.backend.device, trainer_device, quiet=True)
    # The configured placement's rate is reused when the bench runs its model device.
    reuse = fed if bench.device == mine.model else None
    rows = [
        _placement_row(candidate, spec.backend.name, mine, bench, ceiling, reuse)
        for candidate in candidates(spec.backend, gpu)
    ]
    rows.sort(key=lambda r: r["note"] != "configured")  # the configured one wins ties
    pick = _pick(rows, doctor.min_gain)
    return {
        "placement_model_device": str(model),
        "placement_ceiling_images_per_s": ceiling.images_per_s,
        "placements": rows,
        "recommended_placement": pick,
    }


def _placement_row(
    candidate: Candidate,
    configured: str,
    mine: Devices,
    bench: _Bench,
    ceiling: Rate,
    fed: Rate | None,
) -> dict[str, Any]:
    """One candidate placement measured (or, for the configured backend and placement,
    its rate ``fed`` reused), or why it is unavailable here."""
    b = candidate.backend
    row: dict[str, Any] = {
        "name": candidate.name,
        "overrides": candidate.overrides,
        "backend": b.name,
        "backend_device": b.device,
        "trainer_device": candidate.trainer_device,
        "images_per_s": None,
        "data_wait": None,
        "vs_ceiling": None,
        "fed": False,
        "note": "",
    }
    try:
        devices = resolve_devices(b.device, candidate.trainer_device, b.name, quiet=True)
        if b.name == configured and devices == mine and fed is not None:
            rate, row["note"] = fed, "configured"
        else:
            log.info("  placement %s", candidate.name)
            out = output_device_for(b.device, candidate.trainer_device, b.name)
            rate = bench.rate(b, output_device=out)
    except DaliPipesError as exc:  # e.g. DALI cannot use this GPU: say so, carry on
        row["note"] = f"unavailable: {exc}"
        return row
    share = rate.images_per_s / ceiling.images_per_s
    row.update(
        images_per_s=rate.images_per_s,
        data_wait=rate.data_wait,
        vs_ceiling=share,
        fed=share >= FED_SHARE,
    )
    return row


def write_tuned(backend: BackendSpec, out_dir: Path) -> Path:
    """A backend config file extending the backend's schema with the tuned values."""
    path = out_dir / "backend" / f"{backend.name}_tuned.yaml"
    body = {"defaults": [f"/schema/backend/{backend.name}@_here_", "_self_"], **asdict(backend)}
    write_text(
        path,
        "# Written by python -m dali_pipes.doctor. Use with:\n"
        f"#   python -m dali_pipes.train --config-dir {out_dir} backend={backend.name}_tuned ...\n"
        + yaml.safe_dump(body, sort_keys=False),
        hint="choose another doctor.out_dir",
    )
    return path


def run_doctor(cfg: DictConfig) -> dict[str, Any]:
    """Measure how input-bound training on ``cfg`` is (the step on synthetic data against
    the step fed by the loader), tune the loader and compare placements; return the report."""
    doctor = to_spec(cfg.doctor, DoctorSpec)
    one_view(cfg, "python -m dali_pipes.doctor")
    spec = loader_spec(cfg, "train", rank=0, world_size=1)
    backend = spec.backend
    if not backend.reads_images:
        raise DaliPipesError("doctor measures a real loader: choose backend=dali or backend=torch")
    cores = cpu_share()
    steps = 4 if doctor.placements else 3
    bench = _Bench(cfg, spec, doctor, devices_of(cfg).model)
    on_device = "one loader batch replayed" if bench.replays else "synthetic on-device data"
    log.info("1/%d training step on %s", steps, on_device)
    synthetic = bench.ceiling()
    log.info("2/%d training step fed by backend=%s", steps, backend.name)
    timeline: list[tuple[float, float]] = []
    fed = bench.rate(backend, timeline)
    report: dict[str, Any] = {
        **environment(),
        "model": cfg.model.name,
        "backend": asdict(backend),
        "model_device": str(bench.device),
        "batch_size": spec.batch_size,
        "synthetic_images_per_s": synthetic.images_per_s,
        "ceiling_data": on_device,
        "loader_images_per_s": fed.images_per_s,
        "loader_vs_synthetic": fed.images_per_s / synthetic.images_per_s,
        "data_wait": fed.data_wait,
        "timeline": timeline,
    }
    if doctor.placements:
        log.info("3/%d every placement this machine has", steps)
        report.update(measure_placements(cfg, spec, doctor, (bench, synthetic, fed)))
    if doctor.tune:
        log.info("%d/%d tuning backend=%s", steps, steps, backend.name)
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
    report["charts"] = [str(path) for path in charts(report, out.parent)]
    write_text(out, json.dumps(report, indent=2, default=str), hint="choose another doctor.out_dir")
    print(summary(report))
    data = {"name": cfg.data.name, "cache": cfg.data.get("cache")}
    print("\n".join(doctor_advice(report, data, torch.cuda.is_available())))
    return report


def charts(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """The report's PNGs: the fed step's timeline and, when it tuned, the tuning trials
    (a report recorded before the timeline existed has only the trials)."""
    title = (
        f"doctor: {report['model']} fed by backend={report['backend']['name']} "
        f"({100 * report['data_wait']:.0f}% of the time waiting for data)"
    )
    written = []
    if report.get("timeline"):
        written.append(timeline_chart(report["timeline"], title, out_dir / "timeline.png"))
    if report.get("trials"):
        written.append(trials_chart(report, out_dir / "trials.png"))
    return written


def main() -> None:
    """``python -m dali_pipes.doctor``."""
    cli.run(run_doctor, "doctor")
