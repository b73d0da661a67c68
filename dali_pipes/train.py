"""``python -m dali_pipes.train``: compose the config, build loaders and model, train.

Single process or ``torchrun --nproc_per_node=N -m dali_pipes.train ...`` (DDP: NCCL on
GPUs, gloo on CPUs; each rank reads its own shard; metrics are summed over ranks; only
rank 0 writes). ``train(cfg)`` is the plain function tests and notebooks call; ``main`` is
the thin Hydra wrapper that turns a :class:`DaliPipesError` into one line and exit code 2.

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

from dali_pipes import checkpoint, cli, distributed
from dali_pipes.config import build_loader, seed_of, to_spec
from dali_pipes.device import resolve_device
from dali_pipes.dist import placement
from dali_pipes.errors import ConfigError, DaliPipesError
from dali_pipes.loop import EpochStats, StepConfig, evaluate, safe_div, train_one_epoch
from dali_pipes.metrics import MetricsLog, summary_line
from dali_pipes.recipe import (
    TrainerSpec,
    make_criterion,
    make_ema,
    make_optimizer,
    make_scheduler,
)

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


def _build_model(cfg: DictConfig, num_classes: int) -> nn.Module:
    try:
        model: nn.Module = hydra.utils.instantiate(cfg.model.arch, num_classes=num_classes)
    except InstantiationException as exc:
        raise ConfigError(
            f"model={cfg.model.name!r} cannot be built: {str(exc).splitlines()[0]}"
        ) from None
    return model


def _rng_state(device: torch.device) -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
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
    spec = to_spec(cfg.trainer, TrainerSpec)
    out = Path(str(cfg.output_dir)).expanduser()
    where = placement()
    main = where.rank == 0
    if main:
        _prepare_output(out)
    _setup_logging(out, main)
    torch.manual_seed(seed_of(cfg) + where.rank)

    # The device the backend will produce batches on, known before any loader exists, so
    # the loader can be asked for the memory format the model wants.
    backend = cfg.get("backend") or {}
    planned = resolve_device(str(backend.get("device", "auto")), str(backend.get("name", "")))
    cfg = _with_loader_memory_format(cfg, spec.use_channels_last(planned))
    if planned.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed input shapes: pick the fastest kernels

    train_loader = build_loader(cfg, "train")
    val_loader = build_loader(cfg, "val")
    device = train_loader.device
    distributed.init(device)
    try:
        return _run(cfg, spec, out, train_loader, val_loader, device, main)
    finally:
        train_loader.close()
        val_loader.close()
        distributed.shutdown()


def _run(
    cfg: DictConfig,
    spec: TrainerSpec,
    out: Path,
    train_loader: Any,
    val_loader: Any,
    device: torch.device,
    main: bool,
) -> dict[str, Any]:
    world = placement().world_size
    channels_last = spec.use_channels_last(device)
    model = _build_model(cfg, train_loader.num_classes).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    # The EMA copies the plain model, before DDP attaches anything to its parameters.
    ema = make_ema(model, spec.ema_decay) if spec.ema_decay is not None else None
    ddp = (
        DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if distributed.active()
        else model
    )

    global_batch = train_loader.batch_size * world
    steps = (
        len(train_loader)
        if spec.max_steps_per_epoch is None
        else min(len(train_loader), spec.max_steps_per_epoch)
    )
    optimizer = make_optimizer(model, spec, global_batch)
    scheduler = make_scheduler(optimizer, spec, steps, spec.epochs * steps)
    autocast = spec.autocast_dtype(device)
    scaler = torch.amp.GradScaler(device.type, enabled=autocast == torch.float16)
    criterion = make_criterion(spec)
    step_cfg = StepConfig(
        autocast,
        channels_last,
        spec.max_steps_per_epoch,
        progress=main,
        clip_grad_norm=spec.clip_grad_norm,
    )
    # Compiled on top of DDP (Dynamo splits the graph at DDP's buckets, so the all-reduce
    # still overlaps the backward); checkpoints keep the plain ``model``'s state_dict (no
    # ``_orig_mod.`` prefix), so they load with or without compile.
    net: nn.Module = torch.compile(ddp) if spec.compile else ddp  # type: ignore[assignment]

    ckpt_dir = out / "checkpoints"
    start_epoch, start_batch = 0, 0
    resume_from = distributed.broadcast(_resume_path(cfg.get("resume"), ckpt_dir) if main else None)
    if resume_from is not None:
        state = checkpoint.load(Path(resume_from))
        _check_same_optimizer(state, spec, Path(resume_from))
        model.load_state_dict(state["model"])
        if ema is not None:
            if state.get("ema") is not None:
                ema.load_state_dict(state["ema"])
            else:
                log.warning("%s has no EMA weights: the EMA starts from the model", resume_from)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        start_epoch = int(state["loader"]["next_epoch"])
        start_batch = int(state["loader"].get("start_batch", 0))
        if len(state["rng"]) == world:
            _set_rng_state(state["rng"][placement().rank], device)
        log.info(
            "resumed from %s: continuing at epoch %d (batch %d) of %d",
            resume_from,
            start_epoch,
            start_batch,
            spec.epochs,
        )

    metrics = MetricsLog(out) if main else None
    if main:
        OmegaConf.save(cfg, out / "config.yaml")
        log.info(
            "training %s on %s (%d classes, %d train / %d val images) with backend=%s on %s; "
            "%d process(es) (%s), global batch %d, peak lr %.4f, autocast %s, %s; "
            "optimizer %s, schedule %s, loss %s, ema %s, clip_grad_norm %s%s",
            cfg.model.name,
            cfg.data.name,
            train_loader.num_classes,
            len(train_loader.spec.source),
            len(val_loader.spec.source),
            cfg.backend.name,
            device,
            world,
            distributed.backend_name(),
            global_batch,
            spec.peak_lr(global_batch),
            {None: "off", torch.bfloat16: "bf16", torch.float16: "fp16"}[autocast],
            "channels_last" if channels_last else "contiguous",
            spec.optimizer["_target_"],
            spec.schedule["_target_"],
            spec.loss,
            spec.ema_decay or "off",
            spec.clip_grad_norm or "off",
            ", torch.compile" if spec.compile else "",
        )

    def save(epoch: int, interrupted_at: int | None, rng: list[Any], row: dict[str, Any]) -> Path:
        position = (epoch + 1, 0) if interrupted_at is None else (epoch, interrupted_at)
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
            "ema": None if ema is None else ema.state_dict(),
            "loader": {
                "next_epoch": position[0],
                "start_batch": position[1],
                "seed": seed_of(cfg),
            },
            "rng": rng,
            "metrics": row,
            "config": OmegaConf.to_container(cfg, resolve=True),
        }
        path = checkpoint.checkpoint_path(ckpt_dir, epoch, interrupted_at)
        checkpoint.save_atomic(state, path)
        checkpoint.prune(ckpt_dir, spec.keep_checkpoints)
        return path

    row: dict[str, Any] = {}
    epoch, tr = start_epoch, EpochStats()
    try:
        for epoch in range(start_epoch, spec.epochs):
            first = start_batch if epoch == start_epoch else 0
            lr = optimizer.param_groups[0]["lr"]
            train_loader.set_epoch(epoch, first)
            limit = None if spec.max_steps_per_epoch is None else spec.max_steps_per_epoch - first
            tr = EpochStats(steps=first)
            train_one_epoch(
                net,
                train_loader,
                criterion,
                optimizer,
                scheduler,
                scaler,
                replace(step_cfg, max_steps=limit),
                f"epoch {epoch}",
                tr,
                ema,
            )
            va = evaluate(net, val_loader, criterion, step_cfg)
            ev = None if ema is None else evaluate(ema, val_loader, criterion, step_cfg)
            ema_sums = [] if ev is None else [ev.loss_sum, ev.correct1, ev.correct5, ev.samples]
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
                    train_loader.skipped,
                    *ema_sums,
                ],
                device,
            )
            secs = distributed.max_(tr.seconds, device)
            ema_row = sums[9:13] if ev is not None else None
            row = _epoch_row(epoch, lr, sums[0:3], sums[4:8], sums[3], secs, world, ema_row)
            row["skipped"] = int(sums[8])
            rng = distributed.gather(_rng_state(device))
            if main:
                assert metrics is not None
                log.info(_summary(row))
                metrics.write(row)
                save(epoch, None, rng, row)
    except KeyboardInterrupt:
        # Ctrl-C / SIGINT: keep what this epoch has done, so resume=auto carries on from here.
        if main:
            path = save(epoch, tr.steps, [_rng_state(device)], row)
            log.warning(
                "interrupted in epoch %d after %d batches; saved %s; continue with resume=auto",
                epoch,
                tr.steps,
                path,
            )
        raise
    finally:
        if metrics is not None:
            metrics.close()
    return row


def main() -> None:
    cli.run(train, "train")


if __name__ == "__main__":
    # Run the package's module, not this __main__ copy of it: the config schemas that
    # dali_pipes.config registers are the package's classes, and a second copy of a
    # schema class would not match them.
    from dali_pipes import train as tool

    tool.main()
