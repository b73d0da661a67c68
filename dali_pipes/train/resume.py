"""Where a run continues: the checkpoint ``resume`` names, loaded into the run's state.

The weights, the EMA, the optimizer, the schedule and the AMP scaler; the loader's position
(mid-epoch too, also on another number of processes: the rest of the epoch is dealt out to
the new ranks); every rank's random generators; a mid-epoch checkpoint's sums so far.
Resuming with another optimizer class is refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import ConfigError, DaliPipesError
from dali_pipes.runtime import distributed
from dali_pipes.train import checkpoints
from dali_pipes.train.loop import EpochStats
from dali_pipes.train.state import TrainingState

log = logging.getLogger("dali_pipes.train")


@dataclass
class Resumed:
    """Where the run starts and what a resumed epoch carries from before the stop."""

    start_epoch: int = 0
    start_batch: int = 0
    mid_epoch: bool = False  # resuming inside start_epoch
    carried: EpochStats = field(default_factory=EpochStats)  # the epoch's sums so far
    carried_skipped: float = 0.0
    carried_lr: float | None = None

    def resumes(self, epoch: int) -> bool:
        """``epoch`` is the one resumed part-way."""
        return epoch == self.start_epoch and self.mid_epoch


def resume_path(resume: str | None, ckpt_dir: Path) -> Path | None:
    """The checkpoint ``resume`` names (``auto``: the newest in ``ckpt_dir``), or None; a
    run without ``resume`` where checkpoints exist is refused rather than overwriting them."""
    existing = checkpoints.latest(ckpt_dir)
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


def check_same_optimizer(state: dict[str, Any], spec: TrainerSpec, path: Path) -> None:
    """An optimizer's state only loads into the same kind of optimizer (momentum buffers
    are not Adam moments): refuse a resume that switched ``trainer.optimizer._target_``."""
    trainer = (state.get("config") or {}).get("trainer") or {}
    saved = (trainer.get("optimizer") or {}).get("_target_", "torch.optim.SGD")
    if saved != spec.optimizer["_target_"]:
        raise ConfigError(
            f"trainer.optimizer._target_={spec.optimizer['_target_']!r} but {path} was "
            f"trained with {saved!r}; resume with that optimizer or choose another output_dir="
        )


def resume(
    cfg: DictConfig, state: TrainingState, loader: Any, ckpt_dir: Path, device: torch.device
) -> Resumed:
    """Load the checkpoint ``cfg.resume`` names (``auto``: the newest in ``ckpt_dir``;
    rank 0 finds it, every rank loads it) into ``state`` and ``loader``; a checkpoint that
    does not fit the run is one line saying what differs and the command that continues it."""
    resume_from = cfg.get("resume")
    main = distributed.ranks().rank == 0
    found = resume_path(resume_from, ckpt_dir) if main else None
    chosen = distributed.broadcast(found)
    if chosen is None:
        return Resumed()
    path = Path(chosen)
    saved = checkpoints.load(path)
    check_same_optimizer(saved, state.spec, path)
    try:
        load_weights(state, saved, path)
    except (RuntimeError, KeyError, ValueError) as exc:
        raise mismatch(path, saved.get("config") or {}, cfg, exc) from None
    resumed = load_position(loader, saved["loader"], path, state.world)
    rank = distributed.ranks().rank
    if rank < len(saved["rng"]):
        checkpoints.set_rng_state(saved["rng"][rank], device)
    carry_partial(resumed, saved.get("partial"), rank)
    log.info(
        "resumed from %s: continuing at epoch %d (batch %d) of %d",
        path,
        resumed.start_epoch,
        resumed.start_batch,
        state.spec.epochs,
    )
    return resumed


#: The settings a checkpoint's tensors depend on, compared when they do not load.
SHAPING = (
    "model.name",
    "data.name",
    "data.root",
    "trainer.optimizer._target_",
    "trainer.ema_decay",
)


def mismatch(
    path: Path, saved: dict[str, Any], cfg: DictConfig, exc: BaseException
) -> DaliPipesError:
    """The one-line error for a checkpoint whose tensors do not load into this run: the
    settings that differ, and the command that continues the run that wrote it."""
    differ = [
        (key, there, OmegaConf.select(cfg, key))
        for key in SHAPING
        if (there := _select(saved, key)) != OmegaConf.select(cfg, key)
    ]
    if differ:
        detail = "; ".join(f"{k}={a} there, {b} here" for k, a, b in differ)
    else:
        text = str(exc).strip()
        detail = text.splitlines()[0] if text else type(exc).__name__
    out = OmegaConf.select(cfg, "output_dir")
    again = " ".join(f"{k}={a}" for k, a, _ in differ if a is not None)
    return DaliPipesError(
        f"cannot resume from {path}: it does not fit this run ({detail}); continue that run "
        f"with: python -m dali_pipes.train {again + ' ' if again else ''}output_dir={out} "
        "resume=auto -- or start this one in another output_dir="
    )


def _select(tree: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def load_weights(state: TrainingState, saved: dict[str, Any], path: Path) -> None:
    """The model, its EMA, the optimizer, the schedule and the AMP scaler."""
    state.model.load_state_dict(saved["model"])
    if state.ema is not None:
        if saved.get("ema") is not None:
            state.ema.load_state_dict(saved["ema"])
        else:
            log.warning("%s has no EMA weights: the EMA starts from the model", path)
    state.optimizer.load_state_dict(saved["optimizer"])
    state.scheduler.load_state_dict(saved["scheduler"])
    state.scaler.load_state_dict(saved["scaler"])


def load_position(loader: Any, saved: dict[str, Any], path: Path, world: int) -> Resumed:
    """Where the run continues. The loader continues the epoch where every rank stopped;
    on another number of processes it deals the rest of the epoch out to the new ranks
    (elastic restart)."""
    loader.load_state_dict(saved)
    resumed = Resumed(
        start_epoch=int(saved["epoch"]),
        start_batch=loader.start_batch,
        # Batches of the new world size can be fewer than were read (start_batch 0).
        mid_epoch=int(saved["samples_seen"]) > 0,
    )
    saved_world = int(saved["world_size"])
    if saved_world != world:
        log.warning(
            "%s was written by %d process(es), this run has %d: the rest of epoch %d is "
            "dealt out to the new ranks (each sample once); the global batch, and with it "
            "the learning rate, changes from here",
            path,
            saved_world,
            world,
            resumed.start_epoch,
        )
    return resumed


def carry_partial(resumed: Resumed, partial: dict[str, float] | None, rank: int) -> None:
    """A mid-epoch checkpoint's sums so far, added to the resumed epoch's figures."""
    if partial is None:
        return
    if rank == 0:  # the sums are over all ranks: counted once
        resumed.carried = EpochStats(
            loss_sum=partial["loss_sum"],
            correct1=partial["correct1"],
            samples=partial["samples"],
            data_wait=partial["data_wait"],
        )
        resumed.carried_skipped = partial["skipped"]
    resumed.carried.seconds = partial["seconds"]
    resumed.carried_lr = partial["lr"]
