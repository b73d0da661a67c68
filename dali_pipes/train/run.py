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
import logging
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dali_pipes.config import cli
from dali_pipes.config.loaders import build_loader, model_device
from dali_pipes.config.specs import seed_of
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import ConfigError, DaliPipesError
from dali_pipes.runtime import distributed
from dali_pipes.runtime.preemption import Preempted, StopRequest
from dali_pipes.train import checkpoints as checkpoint
from dali_pipes.train.ema import make_ema
from dali_pipes.train.loop import EpochStats, StepConfig, evaluate, safe_div, train_one_epoch
from dali_pipes.train.losses import make_criterion
from dali_pipes.train.metrics import MetricsLog, summary_line
from dali_pipes.train.optimizers import make_optimizer
from dali_pipes.train.recipe import trainer_spec
from dali_pipes.train.schedules import make_scheduler

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
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise DaliPipesError(
            f"output_dir {out} is not writable ({exc.strerror or exc}); choose another output_dir="
        ) from None


def build_model(cfg: DictConfig, num_classes: int) -> nn.Module:
    """``cfg.model.arch`` built for ``num_classes`` (one line if it cannot be)."""
    try:
        model: nn.Module = hydra.utils.instantiate(cfg.model.arch, num_classes=num_classes)
    except InstantiationException as exc:
        raise ConfigError(
            f"model={cfg.model.name!r} cannot be built: {str(exc).splitlines()[0]}"
        ) from None
    return model


def _rng_state(device: torch.device) -> dict[str, Any]:
    """This process's random generators, as tensors and plain numbers only, so that a
    checkpoint loads with ``torch.load(weights_only=True)`` (NumPy's state is an array)."""
    _, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "python": random.getstate(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    saved = state["numpy"]
    keys = saved["keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", keys, saved["pos"], saved["has_gauss"], saved["gauss"]))
    random.setstate(state["python"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _resume_path(resume: str | None, ckpt_dir: Path) -> Path | None:
    existing = checkpoint.latest(ckpt_dir)
    if resume is not None and not isinstance(resume, str):
        raise ConfigError(f"resume={resume!r} is invalid: use null, auto or a checkpoint path")
    if resume is None:
        if existing is not None:
            raise DaliPipesError(
                f"{ckpt_dir} already holds checkpoints ({existing.name}); pass resume=auto to "
                "continue that run or choose another output_dir="
            )
        return None
    if resume == "auto":
        return existing
    path = Path(resume)
    if not path.is_file():
        raise DaliPipesError(f"resume={resume}: no such checkpoint file; use resume=auto or a path")
    return path


def _epoch_row(
    epoch: int,
    lr: float,
    tr: list[float],
    va: list[float],
    wait: float,
    secs: float,
    world: int,
    ema: list[float] | None = None,
) -> dict[str, Any]:
    loss_sum, correct1, samples = tr
    vloss, v1, v5, vn = va
    row = {
        "epoch": epoch,
        "lr": lr,
        "train_loss": safe_div(loss_sum, samples),
        "train_top1": safe_div(correct1, samples),
        "val_loss": safe_div(vloss, vn),
        "val_top1": safe_div(v1, vn),
        "val_top5": safe_div(v5, vn),
    }
    if ema is not None:  # the EMA weights on the same validation set
        eloss, e1, e5, en = ema
        row |= {
            "ema_val_loss": safe_div(eloss, en),
            "ema_val_top1": safe_div(e1, en),
            "ema_val_top5": safe_div(e5, en),
        }
    return row | {
        "samples": int(samples),
        "images_per_s": safe_div(samples, secs),
        "data_wait": safe_div(wait, secs * world),
        "epoch_seconds": secs,
    }


def _summary(row: dict[str, Any]) -> str:
    """The epoch's summary line, with the EMA model's validation figures when there is one."""
    keys = [k for k in ("ema_val_loss", "ema_val_top1", "ema_val_top5") if k in row]
    return " | ".join([summary_line(row), *(f"{k} {row[k]:.4f}" for k in keys)])


def _with_loader_memory_format(cfg: DictConfig, channels_last: bool) -> DictConfig:
    """``cfg`` with ``augment.channels_last`` on when the trainer wants channels_last, so
    the loader produces that layout (DALI writes NHWC memory; the torch and synthetic
    backends convert where they normalise) and the loop's conversion is a no-op instead of
    a copy of every batch. An ``augment.channels_last: true`` of the config stays on."""
    if not channels_last or "augment" not in cfg or cfg.augment.get("channels_last", False):
        return cfg
    cfg = copy.deepcopy(cfg)
    cfg.augment.channels_last = True
    return cfg


def _check_same_optimizer(state: dict[str, Any], spec: TrainerSpec, path: Path) -> None:
    """An optimizer's state only loads into the same kind of optimizer (momentum buffers
    are not Adam moments): refuse a resume that switched ``trainer.optimizer._target_``."""
    trainer = (state.get("config") or {}).get("trainer") or {}
    saved = (trainer.get("optimizer") or {}).get("_target_", "torch.optim.SGD")
    if saved != spec.optimizer["_target_"]:
        raise ConfigError(
            f"trainer.optimizer._target_={spec.optimizer['_target_']!r} but {path} was "
            f"trained with {saved!r}; resume with that optimizer or choose another output_dir="
        )


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train ``cfg.model`` on ``cfg.data`` for ``cfg.trainer.epochs``; return the last row."""
    spec = trainer_spec(cfg.trainer)
    out = Path(str(cfg.output_dir)).expanduser()
    where = distributed.placement()
    main = where.rank == 0
    if main:
        _prepare_output(out)
    _setup_logging(out, main)
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
        return _Run(cfg, spec, out, train_loader, val_loader, train_loader.device).run(out)
    finally:
        for loader in loaders:
            loader.close()
        distributed.shutdown()


class _Run:
    """One training run's state and its steps: build, resume, train an epoch, finish it,
    save, stop. ``train`` drives it; each method is one step a reader can follow."""

    def __init__(
        self,
        cfg: DictConfig,
        spec: TrainerSpec,
        out: Path,
        train_loader: Any,
        val_loader: Any,
        device: torch.device,
    ) -> None:
        self.cfg, self.spec, self.device = cfg, spec, device
        self.train_loader, self.val_loader = train_loader, val_loader
        self.main = distributed.placement().rank == 0
        self.world = distributed.placement().world_size
        self.ckpt_dir = out / "checkpoints"
        self.channels_last = spec.use_channels_last(device)
        model = build_model(cfg, train_loader.num_classes).to(device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        # The EMA copies the plain model, before DDP attaches anything to its parameters.
        self.ema = make_ema(model, spec.ema_decay) if spec.ema_decay is not None else None
        ddp = (
            DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
            if distributed.active()
            else model
        )
        self.global_batch = train_loader.batch_size * self.world
        steps = (
            len(train_loader)
            if spec.max_steps_per_epoch is None
            else min(len(train_loader), spec.max_steps_per_epoch)
        )
        self.optimizer = make_optimizer(model, spec, self.global_batch)
        self.scheduler = make_scheduler(self.optimizer, spec, steps, spec.epochs * steps)
        self.autocast = spec.autocast_dtype(device)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.autocast == torch.float16)
        self.criterion = make_criterion(spec)
        self.step_cfg = StepConfig(
            self.autocast,
            self.channels_last,
            spec.max_steps_per_epoch,
            progress=self.main,
            clip_grad_norm=spec.clip_grad_norm,
        )
        # Compiled on top of DDP (Dynamo splits the graph at DDP's buckets, so the all-reduce
        # still overlaps the backward); checkpoints keep the plain ``model``'s state_dict (no
        # ``_orig_mod.`` prefix), so they load with or without compile.
        self.net: nn.Module = torch.compile(ddp) if spec.compile else ddp  # type: ignore[assignment]
        self.start_epoch, self.start_batch = 0, 0
        self.mid_epoch = False  # resuming inside start_epoch
        self.carried = EpochStats()  # a resumed epoch's sums from before the interruption
        self.carried_skipped = 0.0
        self.carried_lr: float | None = None
        self.metrics: MetricsLog | None = None

    # ------------------------------------------------------------------ resume

    def resume(self) -> None:
        """Load the checkpoint ``resume`` names (rank 0 finds it, every rank loads it)."""
        found = _resume_path(self.cfg.get("resume"), self.ckpt_dir) if self.main else None
        resume_from = distributed.broadcast(found)
        if resume_from is None:
            return
        path = Path(resume_from)
        state = checkpoint.load(path)
        _check_same_optimizer(state, self.spec, path)
        self._load_weights(state, path)
        self._load_position(state["loader"], path)
        rank = distributed.placement().rank
        if rank < len(state["rng"]):
            _set_rng_state(state["rng"][rank], self.device)
        self._carry_partial(state.get("partial"), rank)
        log.info(
            "resumed from %s: continuing at epoch %d (batch %d) of %d",
            path,
            self.start_epoch,
            self.start_batch,
            self.spec.epochs,
        )

    def _load_weights(self, state: dict[str, Any], path: Path) -> None:
        """The model, its EMA, the optimizer, the schedule and the AMP scaler."""
        self.model.load_state_dict(state["model"])
        if self.ema is not None:
            if state.get("ema") is not None:
                self.ema.load_state_dict(state["ema"])
            else:
                log.warning("%s has no EMA weights: the EMA starts from the model", path)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])

    def _load_position(self, loader: dict[str, Any], path: Path) -> None:
        """Where the run continues. The loader continues the epoch where every rank
        stopped; on another number of processes it deals the rest of the epoch out to the
        new ranks (elastic restart)."""
        self.train_loader.load_state_dict(loader)
        self.start_epoch = int(loader["epoch"])
        self.start_batch = self.train_loader.start_batch
        # Batches of the new world size can be fewer than were read (start_batch 0).
        self.mid_epoch = int(loader["samples_seen"]) > 0
        saved_world = int(loader["world_size"])
        if saved_world != self.world:
            log.warning(
                "%s was written by %d process(es), this run has %d: the rest of epoch %d is "
                "dealt out to the new ranks (each sample once); the global batch, and with it "
                "the learning rate, changes from here",
                path,
                saved_world,
                self.world,
                self.start_epoch,
            )

    def _carry_partial(self, partial: dict[str, float] | None, rank: int) -> None:
        """A mid-epoch checkpoint's sums so far, added to the resumed epoch's figures."""
        if partial is None:
            return
        if rank == 0:  # the sums are over all ranks: counted once
            self.carried = EpochStats(
                loss_sum=partial["loss_sum"],
                correct1=partial["correct1"],
                samples=partial["samples"],
                data_wait=partial["data_wait"],
            )
            self.carried_skipped = partial["skipped"]
        self.carried.seconds = partial["seconds"]
        self.carried_lr = partial["lr"]

    # ------------------------------------------------------------------ epochs

    def train_epoch(self, epoch: int, stop: StopRequest) -> EpochStats:
        """Train one epoch (the rest of it, when resuming inside it)."""
        resumed = epoch == self.start_epoch and self.mid_epoch
        if not resumed:  # a resumed epoch's position came from the checkpoint
            self.train_loader.set_epoch(epoch)
        first = self.train_loader.start_batch
        max_steps = self.spec.max_steps_per_epoch
        stats = replace(self.carried, steps=first) if resumed else EpochStats()
        train_one_epoch(
            self.net,
            self.train_loader,
            self.criterion,
            self.optimizer,
            self.scheduler,
            self.scaler,
            replace(self.step_cfg, max_steps=None if max_steps is None else max_steps - first),
            f"epoch {epoch}",
            stats,
            self.ema,
            stop=stop.poll,
        )
        return stats

    def finish_epoch(self, epoch: int, lr: float, tr: EpochStats) -> dict[str, Any]:
        """Validate, sum the epoch's figures over ranks, log, write metrics and checkpoint."""
        va = evaluate(self.net, self.val_loader, self.criterion, self.step_cfg)
        ev = (
            None
            if self.ema is None
            else evaluate(self.ema, self.val_loader, self.criterion, self.step_cfg)
        )
        ema_sums = [] if ev is None else [ev.loss_sum, ev.correct1, ev.correct5, ev.samples]
        skipped = self.train_loader.skipped + self._carried_skipped(epoch)
        sums = distributed.sum_(
            [
                tr.loss_sum,
                tr.correct1,
                tr.samples,
                tr.data_wait,
                va.loss_sum,
                va.correct1,
                va.correct5,
                va.samples,
                skipped,
                *ema_sums,
            ],
            self.device,
        )
        secs = distributed.max_(tr.seconds, self.device)
        ema_row = sums[9:13] if ev is not None else None
        row = _epoch_row(epoch, lr, sums[0:3], sums[4:8], sums[3], secs, self.world, ema_row)
        row["skipped"] = int(sums[8])
        rng = distributed.gather(_rng_state(self.device))
        if self.main:
            log.info(_summary(row))
            assert self.metrics is not None
            self.metrics.write(row)
            self.save(epoch, None, rng, row)
        return row

    def epoch_lr(self, epoch: int) -> float:
        """The learning rate the epoch started with (logged in its row), also when the
        epoch is resumed part-way."""
        if epoch == self.start_epoch and self.mid_epoch and self.carried_lr is not None:
            return self.carried_lr
        return float(self.optimizer.param_groups[0]["lr"])

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
        rng = distributed.gather(_rng_state(self.device))
        path = self.save(epoch, tr.steps, rng, {}, partial) if self.main else None
        # Nobody exits before rank 0 has written: a launcher stops the others as soon as
        # one process ends with an error.
        path = distributed.broadcast(path)
        message = (
            f"interrupted by {stop.name} in epoch {epoch} after {tr.steps} batches; "
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
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "ema": None if self.ema is None else self.ema.state_dict(),
            "loader": loader,
            "rng": rng,  # one entry per rank
            "partial": partial,  # a mid-epoch checkpoint's sums so far (over all ranks)
            "metrics": row,
            "config": OmegaConf.to_container(self.cfg, resolve=True),
        }
        path = checkpoint.checkpoint_path(self.ckpt_dir, epoch, interrupted_at)
        checkpoint.save_atomic(state, path)
        checkpoint.prune(self.ckpt_dir, self.spec.keep_checkpoints)
        return path

    def _carried_skipped(self, epoch: int) -> float:
        """Files skipped in a resumed epoch before the interruption (counted on rank 0)."""
        resumed = epoch == self.start_epoch and self.mid_epoch
        return self.carried_skipped if resumed else 0.0

    def describe(self, out: Path) -> None:
        """Save the composed config and log what is about to run (rank 0)."""
        cfg, spec, loader = self.cfg, self.spec, self.train_loader
        OmegaConf.save(cfg, out / "config.yaml")
        log.info(
            "training %s on %s (%d classes, %d train / %d val images) with backend=%s on %s; "
            "%d process(es) (%s), global batch %d, peak lr %.4f, autocast %s, %s; "
            "optimizer %s, schedule %s, loss %s, ema %s, clip_grad_norm %s%s",
            cfg.model.name,
            cfg.data.name,
            loader.num_classes,
            len(loader.spec.source),
            len(self.val_loader.spec.source),
            cfg.backend.name,
            self.device,
            self.world,
            distributed.backend_name(),
            self.global_batch,
            spec.peak_lr(self.global_batch),
            {None: "off", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.autocast],
            "channels_last" if self.channels_last else "contiguous",
            spec.optimizer["_target_"],
            spec.schedule["_target_"],
            spec.loss,
            spec.ema_decay or "off",
            spec.clip_grad_norm or "off",
            ", torch.compile" if spec.compile else "",
        )

    def run(self, out: Path) -> dict[str, Any]:
        """Resume if asked, then train epoch by epoch until done or told to stop."""
        self.resume()
        if self.main:
            self.metrics = MetricsLog(out)
            self.describe(out)
        row: dict[str, Any] = {}
        try:
            with StopRequest() as stop:
                for epoch in range(self.start_epoch, self.spec.epochs):
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
        return row


def main() -> None:
    cli.run(train, "train")
