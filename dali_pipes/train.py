"""``python -m dali_pipes.train``: compose the config, build loaders and model, train.

Single process or ``torchrun --nproc_per_node=N -m dali_pipes.train ...`` (DDP: NCCL on
GPUs, gloo on CPUs; each rank reads its own shard; metrics are summed over ranks; only
rank 0 writes). ``train(cfg)`` is the plain function tests and notebooks call; ``main`` is
the thin Hydra wrapper that turns a :class:`DaliPipesError` into one line and exit code 2.

Outputs go to ``output_dir`` (default ``outputs/<data>-<model>``): ``train.log``,
``config.yaml``, ``metrics.csv``, ``tensorboard/`` and ``checkpoints/epoch_NNNN.pt``, each
written atomically at the end of every epoch. ``resume=auto`` continues from the newest
checkpoint there; starting without it where checkpoints exist is refused, so a run is
never overwritten by accident.
"""

from __future__ import annotations

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
from dali_pipes.dist import placement
from dali_pipes.errors import ConfigError, DaliPipesError
from dali_pipes.loop import EpochStats, StepConfig, evaluate, safe_div, train_one_epoch
from dali_pipes.metrics import MetricsLog, summary_line
from dali_pipes.recipe import TrainerSpec, make_optimizer, warmup_cosine

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
    epoch: int, lr: float, tr: list[float], va: list[float], wait: float, secs: float, world: int
) -> dict[str, Any]:
    loss_sum, correct1, samples = tr
    vloss, v1, v5, vn = va
    return {
        "epoch": epoch,
        "lr": lr,
        "train_loss": safe_div(loss_sum, samples),
        "train_top1": safe_div(correct1, samples),
        "val_loss": safe_div(vloss, vn),
        "val_top1": safe_div(v1, vn),
        "val_top5": safe_div(v5, vn),
        "samples": int(samples),
        "images_per_s": safe_div(samples, secs),
        "data_wait": safe_div(wait, secs * world),
        "epoch_seconds": secs,
    }


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
    scheduler = warmup_cosine(optimizer, spec.epochs * steps, round(spec.warmup_epochs * steps))
    autocast = spec.autocast_dtype(device)
    scaler = torch.amp.GradScaler(device.type, enabled=autocast == torch.float16)
    criterion = nn.CrossEntropyLoss(label_smoothing=spec.label_smoothing)
    step_cfg = StepConfig(autocast, channels_last, spec.max_steps_per_epoch, progress=main)

    ckpt_dir = out / "checkpoints"
    start_epoch, start_batch = 0, 0
    resume_from = distributed.broadcast(_resume_path(cfg.get("resume"), ckpt_dir) if main else None)
    if resume_from is not None:
        state = checkpoint.load(Path(resume_from))
        model.load_state_dict(state["model"])
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
            "%d process(es) (%s), global batch %d, peak lr %.4f, autocast %s, %s",
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
        )

    def save(epoch: int, interrupted_at: int | None, rng: list[Any], row: dict[str, Any]) -> Path:
        position = (epoch + 1, 0) if interrupted_at is None else (epoch, interrupted_at)
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
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
                ddp,
                train_loader,
                criterion,
                optimizer,
                scheduler,
                scaler,
                replace(step_cfg, max_steps=limit),
                f"epoch {epoch}",
                tr,
            )
            va = evaluate(ddp, val_loader, criterion, step_cfg)
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
                ],
                device,
            )
            secs = distributed.max_(tr.seconds, device)
            row = _epoch_row(epoch, lr, sums[0:3], sums[4:8], sums[3], secs, world)
            row["skipped"] = int(sums[8])
            rng = distributed.gather(_rng_state(device))
            if main:
                assert metrics is not None
                log.info(summary_line(row))
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
