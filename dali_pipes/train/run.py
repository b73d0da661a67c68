"""``python -m dali_pipes.train``: compose the config, build loaders and model, train.

Single process or ``torchrun --nproc_per_node=N -m dali_pipes.train ...`` (DDP: NCCL on
GPUs, gloo on CPUs; each rank reads its own share of the samples; metrics are summed over
ranks; only rank 0 writes). ``train(cfg)`` is the plain function tests and notebooks call;
``main`` is the thin Hydra wrapper that turns a :class:`DaliPipesError` into one line and
exit code 2.

Outputs go to ``output_dir`` (default ``outputs/<data>-<model>``): ``train.log``,
``config.yaml``, ``metrics.csv``, ``tensorboard/`` and ``checkpoints/epoch_NNNN.pt`` (with
the EMA weights when ``trainer.ema_decay`` is set), each written atomically at the end of
every epoch. ``resume=auto`` continues from the newest checkpoint there; starting without
it where checkpoints exist is refused, so a run is never overwritten by accident.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.handover import pixels
from dali_pipes.config import cli
from dali_pipes.config.loaders import build_loader, model_device
from dali_pipes.config.specs import one_view, seed_of, to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.data import files
from dali_pipes.data.manifest import write_manifest
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime import distributed
from dali_pipes.runtime.preemption import Preempted, StopRequest
from dali_pipes.train import checkpoints
from dali_pipes.train.loop import BatchHook, EpochStats, train_one_epoch
from dali_pipes.train.metrics import MetricsLog, epoch_row, epoch_summary, run_summary
from dali_pipes.train.resume import Resumed, resume
from dali_pipes.train.state import build_state, trainer_spec

log = logging.getLogger("dali_pipes.train")


def _setup_logging(out: Path, main: bool) -> None:
    root = logging.getLogger("dali_pipes")
    root.handlers.clear()
    root.setLevel(logging.INFO if main else logging.WARNING)
    root.propagate = False
    fmt = logging.Formatter("[%(asctime)s] %(message)s", "%H:%M:%S")
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(fmt)
    root.addHandler(console)
    if main:
        file = logging.FileHandler(out / "train.log")
        file.setFormatter(fmt)
        root.addHandler(file)


def _prepare_output(out: Path) -> None:
    """Make ``out``, a writable folder."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise DaliPipesError(
            f"output_dir {out} is not writable ({exc.strerror or exc}); choose another output_dir="
        ) from None


def _remove_stale(out: Path) -> None:
    """Remove the temporary files a run killed while writing left in ``out``."""
    for folder in (out, out / "checkpoints"):
        for stale in files.remove_stale(folder):
            log.info("removed %s, left by a run killed while writing it", stale)


def _with_loader_memory_format(cfg: DictConfig, channels_last: bool) -> DictConfig:
    """``cfg`` with ``augment.channels_last`` on when the trainer wants channels_last, so
    the loader produces that layout (DALI writes NHWC memory; the torch and synthetic
    backends convert where they normalise) and the loop's conversion is a no-op instead of
    a copy of every batch. An ``augment.channels_last: true`` of the config stays on.

    Not when a split's images keep sizes of their own (a detector's, each image whole):
    such a batch is a list of ``[3, H, W]`` tensors, which has no memory format to ask
    for; the model is still channels_last and takes them as they are."""
    if not channels_last or "augment" not in cfg or cfg.augment.get("channels_last", False):
        return cfg
    augment = to_spec(cfg.augment, AugmentSpec)
    if augment.own_sizes(True) or augment.own_sizes(False):
        return cfg
    cfg = copy.deepcopy(cfg)
    cfg.augment.channels_last = True
    return cfg


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train ``cfg.model`` on ``cfg.data`` for ``cfg.trainer.epochs``; return the last row."""
    spec = trainer_spec(cfg.trainer)
    one_view(cfg, "python -m dali_pipes.train")
    out = Path(str(cfg.output_dir)).expanduser()
    where = distributed.ranks()
    main = where.rank == 0
    if main:
        _prepare_output(out)
    _setup_logging(out, main)
    if main:
        _remove_stale(out)
    torch.manual_seed(seed_of(cfg) + where.rank)

    # The model's device (trainer.device, or where the backend makes batches), known before
    # any loader exists, so the loader can be asked for the memory format the model wants.
    planned = model_device(cfg)
    cfg = _with_loader_memory_format(cfg, spec.use_channels_last(planned))
    if planned.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed input shapes: pick the fastest kernels

    # The process group first: loaders may coordinate the ranks of a node (data.cache=ram).
    distributed.init(planned)
    loaders: list[Any] = []
    try:
        loaders.append(build_loader(cfg, "train"))
        loaders.append(build_loader(cfg, "val"))
        train_loader, val_loader = loaders
        val_loader.bad.share_reports(train_loader.bad)  # a file of both splits: one warning
        return _Run(cfg, spec, out, train_loader, val_loader).run()
    finally:
        for loader in loaders:
            loader.close()
        distributed.shutdown()


def on_cpu(value: Any) -> Any:
    """A batch's images or labels (tensors, lists of them, target dicts) on the CPU."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: on_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [on_cpu(v) for v in value]
    return value


def _sampling(loader: Any) -> str:
    """The training sampler in the run's first line, when it is not every sample once."""
    name = loader.spec.sampler.name
    describe = getattr(loader.rank_sampler, "describe", None)
    if describe is not None:  # a mix: each source's samples per epoch
        return f", data=mix ({describe()} per epoch)"
    if name == "default":
        return ""
    return f", sampling={name} ({loader.rank_sampler.epoch_length} samples per epoch)"


class _Run:
    """One training run's epochs: train one, finish it (validate, sum over ranks, log,
    write metrics and a checkpoint), or stop mid-way with a checkpoint. The state it trains
    is :class:`~dali_pipes.train.state.TrainingState`; where it starts,
    :class:`~dali_pipes.train.resume.Resumed`."""

    def __init__(
        self, cfg: DictConfig, spec: TrainerSpec, out: Path, train_loader: Any, val_loader: Any
    ) -> None:
        self.cfg, self.spec, self.out = cfg, spec, out
        self.device: torch.device = train_loader.device
        self.train_loader, self.val_loader = train_loader, val_loader
        self.main = distributed.ranks().rank == 0
        self.ckpt_dir = out / "checkpoints"
        self.state = build_state(cfg, spec, train_loader, self.device, self.main)
        self.resumed = Resumed()
        self.metrics: MetricsLog | None = None
        self.images_logged = False

    def train_epoch(self, epoch: int, stop: StopRequest) -> EpochStats:
        """Train one epoch (the rest of it, when resuming inside it)."""
        resumed = self.resumed.resumes(epoch)
        if not resumed:  # a resumed epoch's position came from the checkpoint
            self.train_loader.set_epoch(epoch)
        first = self.train_loader.start_batch
        max_steps = self.spec.max_steps_per_epoch
        stats = replace(self.resumed.carried, steps=first) if resumed else EpochStats()
        s = self.state
        train_one_epoch(
            s.net,
            self.train_loader,
            s.task,
            s.optimizer,
            s.scheduler,
            s.scaler,
            replace(s.step, max_steps=None if max_steps is None else max_steps - first),
            f"epoch {epoch}",
            stats,
            s.ema,
            stop=stop.poll,
            on_batch=self.batch_hook(epoch, first),
        )
        return stats

    def batch_hook(self, epoch: int, first: int) -> BatchHook:
        """What the run does with a batch before training on it: save it when it is one of
        the run's first ``trainer.save_batches`` steps (every rank; named by the run's step,
        :meth:`TrainerSpec.step_at`'s inverse), and log the first batch this process trains
        on to TensorBoard as images (rank 0)."""
        per_epoch = self.spec.steps_per_epoch(len(self.train_loader))
        rank = distributed.ranks().rank

        def hook(k: int, images: Any, labels: Any) -> None:
            step = epoch * per_epoch + first + k
            if step < self.spec.save_batches:
                path = self.out / "batches" / f"step_{step:07d}_rank_{rank}.pt"
                batch = {"images": on_cpu(images), "labels": on_cpu(labels)}
                checkpoints.save_atomic(batch | {"epoch": epoch, "batch": first + k}, path)
            if self.metrics is not None and not self.images_logged:
                self.images_logged = True
                # images of their own sizes: the first alone (a picture batch has one size)
                batch_of = images if isinstance(images, torch.Tensor) else images[0][None]
                seen = pixels(batch_of, self.train_loader.spec.augment)
                self.metrics.images("train/first_batch", seen, step)

        return hook

    def finish_epoch(self, epoch: int, lr: float, tr: EpochStats) -> dict[str, Any]:
        """Validate, sum the epoch's figures over ranks, log, write metrics and checkpoint."""
        s = self.state
        passes = [s.task.evaluate(s.net, self.val_loader, s.step)]
        if s.ema is not None:  # the EMA weights on the same validation set
            passes.append(s.task.evaluate(s.ema, self.val_loader, s.step))
        # Distinct bad files of both splits (the validation epoch just ran).
        both = self.train_loader.bad.epoch_paths | self.val_loader.bad.epoch_paths
        skipped = len(both) + self._carried_skipped(epoch)
        train_sums = [tr.loss_sum, tr.correct1, tr.samples, tr.data_wait, skipped]
        each = [p.sums for p in passes]
        sums = distributed.sum_([*train_sums, *(v for part in each for v in part)], self.device)
        secs = distributed.max_(tr.seconds, self.device)
        figures, at = [], len(train_sums)
        for p, part in zip(passes, each, strict=True):
            records = [] if p.records() is None else distributed.gather(p.records())
            figures.append(p.figures(sums[at : at + len(part)], records))
            at += len(part)
        ema = figures[1] if len(figures) > 1 else None
        train = (sums[0], sums[1] if s.task.train_figure else None, sums[2])
        row = epoch_row(epoch, lr, train, figures[0], sums[3], secs, s.world, ema, s.task)
        row["skipped"] = int(sums[4])
        rng = distributed.gather(checkpoints.rng_state(self.device))
        bad = self.bad_files()
        if self.main:
            log.info(epoch_summary(row))
            assert self.metrics is not None
            self.metrics.write(row)
            self.save(epoch, None, rng, row)
            self.list_bad_files(bad)
        return row

    def bad_files(self) -> dict[str, str]:
        """Every rank's bad files so far (on_error=skip|drop), path -> reason."""
        mine = {**self.train_loader.bad_files, **self.val_loader.bad_files}
        return {k: v for part in distributed.gather(mine) for k, v in part.items()}

    def list_bad_files(self, bad: dict[str, str]) -> None:
        """Write them as a scan manifest (``bad_files.csv``), for ``data.exclude``."""
        if not bad:
            return
        path = self.out / "bad_files.csv"
        write_manifest(path, bad.items())
        log.info(
            "%d bad files listed in %s; leave them out with data.exclude=%s", len(bad), path, path
        )

    def epoch_lr(self, epoch: int) -> float:
        """The learning rate the epoch started with (logged in its row), also when the
        epoch is resumed part-way."""
        if self.resumed.resumes(epoch) and self.resumed.carried_lr is not None:
            return self.resumed.carried_lr
        return float(self.state.optimizer.param_groups[0]["lr"])

    def stop_mid_epoch(self, epoch: int, lr: float, tr: EpochStats, stop: StopRequest) -> Preempted:
        """Every rank stopped after the same step: write one consistent checkpoint (all
        ranks' generators, the epoch's sums so far) and say how to continue."""
        skipped = self.train_loader.skipped + self._carried_skipped(epoch)
        sums = distributed.sum_(
            [tr.loss_sum, tr.correct1, tr.samples, tr.data_wait, skipped], self.device
        )
        partial = dict(
            zip(("loss_sum", "correct1", "samples", "data_wait", "skipped"), sums, strict=True)
        )
        partial["seconds"] = distributed.max_(tr.seconds, self.device)
        partial["lr"] = lr
        rng = distributed.gather(checkpoints.rng_state(self.device))
        path = self.save(epoch, tr.steps, rng, {}, partial) if self.main else None
        # Nobody exits before rank 0 has written: a launcher stops the others as soon as
        # one process ends with an error.
        path = distributed.broadcast(path)
        batches = f"{tr.steps} batch{'es' if tr.steps != 1 else ''}"
        message = (
            f"interrupted by {stop.name} in epoch {epoch} after {batches}; "
            f"saved {path}; continue with resume=auto"
        )
        log.warning(message)
        return Preempted(stop.signum, message)

    def save(
        self,
        epoch: int,
        interrupted_at: int | None,
        rng: list[Any],
        row: dict[str, Any],
        partial: dict[str, float] | None = None,
    ) -> Path:
        loader = self.train_loader.state_dict()  # where every rank stopped
        if interrupted_at is None:  # the epoch is done (also when max_steps_per_epoch cut it)
            loader |= {"epoch": epoch + 1, "samples_seen": 0}
        s = self.state
        saved = {
            "model": s.model.state_dict(),
            "optimizer": s.optimizer.state_dict(),
            "scheduler": s.scheduler.state_dict(),
            "scaler": s.scaler.state_dict(),
            "ema": None if s.ema is None else s.ema.state_dict(),
            "loader": loader,
            "rng": rng,  # one entry per rank
            "partial": partial,  # a mid-epoch checkpoint's sums so far (over all ranks)
            "metrics": row,
            "config": OmegaConf.to_container(self.cfg, resolve=True),
        }
        path = checkpoints.checkpoint_path(self.ckpt_dir, epoch, interrupted_at)
        checkpoints.save_atomic(saved, path)
        checkpoints.prune(self.ckpt_dir, self.spec.keep_checkpoints)
        return path

    def _carried_skipped(self, epoch: int) -> float:
        """Files skipped in a resumed epoch before the interruption (counted on rank 0)."""
        return self.resumed.carried_skipped if self.resumed.resumes(epoch) else 0.0

    def describe(self) -> None:
        """Save the composed config and log what is about to run (rank 0)."""
        cfg, spec, loader, s = self.cfg, self.spec, self.train_loader, self.state
        hint = "free space or choose another output_dir"
        files.write_text(self.out / "config.yaml", OmegaConf.to_yaml(cfg), hint=hint)
        # What replaying a step needs besides the config (python -m dali_pipes.show)
        layout = {
            "world_size": s.world,
            "batches_per_epoch": len(loader),
            "steps_per_epoch": spec.steps_per_epoch(len(loader)),
        }
        files.write_text(self.out / "run.json", json.dumps(layout, indent=2) + "\n", hint=hint)
        log.info(
            "training %s on %s (%d classes, %d train / %d val images) with backend=%s on %s; "
            "%d process(es) (%s), global batch %d, peak lr %.4f, autocast %s, %s; "
            "optimizer %s, schedule %s, loss %s, ema %s, clip_grad_norm %s%s%s",
            cfg.model.name,
            cfg.data.name,
            loader.num_classes,
            len(loader.spec.source),
            len(self.val_loader.spec.source),
            cfg.backend.name,
            self.device,
            s.world,
            distributed.backend_name(),
            s.global_batch,
            spec.peak_lr(s.global_batch),
            {None: "off", torch.bfloat16: "bf16", torch.float16: "fp16"}[s.autocast],
            "channels_last" if s.channels_last else "contiguous",
            spec.optimizer["_target_"],
            spec.schedule["_target_"],
            s.task.loss_name,
            spec.ema_decay or "off",
            spec.clip_grad_norm or "off",
            ", torch.compile" if spec.compile else "",
            _sampling(loader),
        )

    def run(self) -> dict[str, Any]:
        """Resume if asked, then train epoch by epoch until done or told to stop; end
        with the run's summary line."""
        started = time.monotonic()
        self.resumed = resume(self.cfg, self.state, self.train_loader, self.ckpt_dir, self.device)
        if self.main:
            self.metrics = MetricsLog(self.out, self.resumed.start_epoch)
            self.describe()
        row: dict[str, Any] = {}
        try:
            with StopRequest(self.spec.stop_timeout) as stop:
                for epoch in range(self.resumed.start_epoch, self.spec.epochs):
                    lr = self.epoch_lr(epoch)
                    tr = self.train_epoch(epoch, stop)
                    if tr.stopped:
                        raise self.stop_mid_epoch(epoch, lr, tr, stop)
                    row = self.finish_epoch(epoch, lr, tr)
                    if epoch < self.spec.epochs - 1 and stop.settle():
                        message = (
                            f"interrupted by {stop.name} after epoch {epoch}; "
                            "continue with resume=auto"
                        )
                        log.warning(message)
                        raise Preempted(stop.signum, message)
        finally:
            if self.metrics is not None:
                self.metrics.close()
        if self.metrics is not None and self.metrics.rows:
            headline = f"val_{self.state.task.headline}"
            log.info(run_summary(self.metrics.rows, time.monotonic() - started, self.out, headline))
        return row


def main() -> None:
    """``python -m dali_pipes.train``."""
    cli.run(train, "train")
