"""``python -m dali_pipes.show`` (any data, augment and backend config): what the model sees.

Writes one PNG (``show.out``):

- by default, the first ``show.samples`` samples of epoch ``show.epoch`` in the training
  order, as one batch through the configured training pipeline (batch stage included),
  un-normalised, one column per backend -- DALI on the GPU where there is one, DALI on the
  CPU, torch -- and the amplified difference between the first and the last column, with
  each sample's label under it (a soft target's two largest classes and their weights;
  for data with boxes, its objects drawn over it and counted under it);
  for a split with views (``augment=dino`` ...), each sample's views side by side, one row
  per backend, and a row of their differences;
- with ``show.run=<output_dir> show.step=<n>`` (``show.rank``), the batch that rank trained
  on at the run's step ``n``, from the run's saved config: the step is an epoch and a batch
  of that epoch (:meth:`~dali_pipes.config.trainer.TrainerSpec.step_at`), and every random
  parameter is a function of (seed, epoch, sample) and the batch's position, so a loader
  started at that batch yields it again, on any backend;
- with ``show.gallery=true``, every registered op at a few settings on the same photos
  (:mod:`dali_pipes.tools.gallery`).
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.base import Images, each_view, has_views
from dali_pipes.backends.handover import pixels
from dali_pipes.backends.targets import labels_to
from dali_pipes.config import cli
from dali_pipes.config.compose import compose_config, load_saved_config
from dali_pipes.config.loaders import build_loader
from dali_pipes.config.schemas import SHOW_BACKENDS, ShowSpec
from dali_pipes.config.specs import to_spec
from dali_pipes.data.specs import DataSpec
from dali_pipes.errors import ConfigError, DaliPipesError, require
from dali_pipes.tools.gallery import SHIPPED, gallery, pick_photos
from dali_pipes.tools.grid import Tile, draw_grid, save_png
from dali_pipes.tools.overlay import (
    boxes_difference,
    classes_caption,
    has_targets,
    objects_caption,
    overlay,
    overlay_classes,
)
from dali_pipes.train.state import trainer_spec

log = logging.getLogger("dali_pipes.show")

#: Each column: the backend it builds and where that backend makes batches.
COLUMNS = {"dali-gpu": ("dali", "gpu"), "dali-cpu": ("dali", "cpu"), "torch": ("torch", "cpu")}


@dataclass(frozen=True)
class Shown:
    """One column's batch as the loader yielded it (on the CPU) and where it came from;
    ``images`` a list of tensors, one per view, for a split with views."""

    column: str
    images: Images
    labels: Any  # a tensor of labels, or detection targets (a dict per image)
    classes: tuple[str, ...]


@dataclass(frozen=True)
class Where:
    """Which batch: this rank of ``world_size`` ranks, batch ``batch`` of epoch ``epoch``,
    ``batch_size`` samples per batch (None: the config's)."""

    epoch: int
    batch: int = 0
    rank: int = 0
    world_size: int = 1
    batch_size: int | None = None


def columns(wanted: tuple[str, ...]) -> tuple[str, ...]:
    """The columns to draw: ``wanted``, or every one this machine has (DALI on the GPU
    needs CUDA)."""
    if wanted:
        return wanted
    return tuple(c for c in SHOW_BACKENDS if c != "dali-gpu" or torch.cuda.is_available())


def column_config(cfg: DictConfig, column: str) -> DictConfig:
    """``cfg`` with the column's backend: the configured backend's options when it is the
    same backend, its config group's defaults otherwise; batches made and kept where that
    backend runs (``trainer.device=auto``). The torch backend reads in this process: the
    pictures are one batch, which its worker processes take longer to start than to make
    (and its samples do not depend on who makes them)."""
    name, device = COLUMNS[column]
    out = copy.deepcopy(cfg)
    if str(out.backend.get("name")) != name:
        out.backend = compose_config([f"backend={name}"]).backend
    out.backend.device = device
    if name == "torch":
        out.backend.num_workers = 0
    if "trainer" in out:
        out.trainer.device = "auto"
    return out


def batch_of(cfg: DictConfig, column: str, where: Where) -> Shown:
    """The training batch ``where`` names, made by ``column``'s backend."""
    ccfg = column_config(cfg, column)
    if where.batch_size is not None:
        ccfg.data.batch_size = where.batch_size
    with build_loader(ccfg, "train", rank=where.rank, world_size=where.world_size) as loader:
        loader.set_epoch(where.epoch, start_batch=where.batch)
        batches = iter(loader)
        images, labels = next(batches)
        del batches
        labels = labels_to(labels, torch.device("cpu"))
        return Shown(column, each_view(torch.Tensor.cpu, images), labels, loader.classes)


def preview(cfg: DictConfig, show: ShowSpec) -> list[Shown]:
    """The first ``show.samples`` samples of epoch ``show.epoch``, as one batch, per column."""
    where = Where(show.epoch, batch_size=show.samples)
    return [batch_of(cfg, column, where) for column in columns(show.backends)]


def replay(show: ShowSpec) -> tuple[list[Shown], Where, DictConfig]:
    """The batch rank ``show.rank`` trained on at step ``show.step`` of the run in
    ``show.run``, per column; where in the run it is; the run's config."""
    run = Path(str(show.run)).expanduser()
    cfg = load_saved_config(run / "config.yaml")
    layout = _run_layout(run)
    world = int(layout["world_size"])
    require(show.rank < world, "show.rank", show.rank, f"the run had {world} rank(s)")
    trainer = trainer_spec(cfg.trainer)
    batches = int(layout["batches_per_epoch"])
    epoch, batch = trainer.step_at(show.step, batches)
    last = trainer.epochs * trainer.steps_per_epoch(batches) - 1
    require(epoch < trainer.epochs, "show.step", show.step, f"the run's last step is {last}")
    where = Where(epoch, batch, show.rank, world)
    shown = [batch_of(cfg, column, where) for column in columns(show.backends)]
    return shown, where, cfg


def _run_layout(run: Path) -> dict[str, Any]:
    """The run's ``run.json`` (its world size and epoch length), or one line saying why not."""
    path = run / "run.json"
    try:
        layout = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{path}: cannot read it ({exc}); show.run must be a training run's output_dir"
        ) from None
    if not isinstance(layout, dict) or not {"world_size", "batches_per_epoch"} <= set(layout):
        raise ConfigError(f"{path} is not the run.json a training run writes")
    return layout


def label_text(label: torch.Tensor, classes: tuple[str, ...]) -> str:
    """A hard label's class name, or a soft target's two largest classes and weights."""
    if label.ndim == 0:
        return classes[int(label)]
    weights, top = label.float().topk(min(2, label.numel()))
    return "\n".join(f"{classes[int(i)]} {float(w):.2f}" for w, i in zip(weights, top, strict=True))


def grid_rows(
    shown: list[Shown], augment: AugmentSpec, count: int, amplify: float
) -> tuple[list[list[Tile]], list[str], list[str]]:
    """Rows of the grid, the header and the rows' titles: each sample in every column,
    then the amplified difference between the first and the last column; for a split
    with views, each sample's views side by side in one row per column, and a row of their
    differences."""
    if has_views(shown[0].images):
        return _view_rows(shown, augment, count, amplify)
    seen = [samples_of(s.images, augment) for s in shown]
    header = [s.column for s in shown]
    rows = []
    for j in range(min(count, len(shown[0].labels))):
        row = [_tile(p[j], s.labels[j], s.classes) for s, p in zip(shown, seen, strict=True)]
        if len(shown) > 1:
            difference = _difference(seen[0][j], seen[-1][j], amplify)
            first, last = shown[0].labels, shown[-1].labels
            extra = None
            if has_targets(first):
                extra = boxes_difference(first[j], last[j])
            elif first.ndim == 3:  # segmentation masks
                extra = f"masks agree {100 * float((first[j] == last[j]).float().mean()):.2f} %"
            if extra is not None:
                difference = Tile(difference.image, f"{difference.caption}\n{extra}")
            row.append(difference)
        rows.append(row)
    if len(shown) > 1:
        header.append(f"|{shown[0].column} - {shown[-1].column}| x{amplify:g}")
    return rows, header, []


def samples_of(images: Images, augment: AugmentSpec) -> list[torch.Tensor]:
    """A batch's images as uint8 pixels, one ``[C, H, W]`` tensor per sample (each of its
    own size where the images have one)."""
    if isinstance(images, torch.Tensor):
        return list(pixels(images, augment))
    return [pixels(image[None], augment)[0] for image in images]


def _view_rows(
    shown: list[Shown], augment: AugmentSpec, count: int, amplify: float
) -> tuple[list[list[Tile]], list[str], list[str]]:
    """A split with views: per sample, one row per column with the sample's views side by
    side (its label under the first), then (several columns) the differences per view."""
    seen = [[pixels(view, augment) for view in s.images] for s in shown]
    names = augment.views(True).names
    header = [
        f"{name} {tuple(view.shape[-2:])}"
        for name, view in zip(names, shown[0].images, strict=True)
    ]
    rows: list[list[Tile]] = []
    titles: list[str] = []
    for j in range(min(count, len(shown[0].labels))):
        for s, views in zip(shown, seen, strict=True):
            label = label_text(s.labels[j], s.classes)
            rows.append([Tile(view[j], label if v == 0 else "") for v, view in enumerate(views)])
            titles.append(f"{j}: {s.column}")
        if len(shown) > 1:
            first, last = seen[0], seen[-1]
            rows.append(
                [_difference(a[j], b[j], amplify) for a, b in zip(first, last, strict=True)]
            )
            titles.append(f"{j}: |{shown[0].column} - {shown[-1].column}| x{amplify:g}")
    return rows, header, titles


def _tile(image: torch.Tensor, label: Any, classes: tuple[str, ...]) -> Tile:
    """One sample: its image and label, its objects drawn over it and counted, or its
    segmentation mask tinted over it."""
    if isinstance(label, dict):
        return Tile(overlay(image, label, classes), objects_caption(label, classes))
    if label.ndim == 2:  # a segmentation mask
        return Tile(overlay_classes(image, label), classes_caption(label))
    return Tile(image, label_text(label, classes))


def _difference(a: torch.Tensor, b: torch.Tensor, amplify: float) -> Tile:
    """The amplified absolute difference of two uint8 images, its figures under it."""
    diff = (a.int() - b.int()).abs()
    amplified = (diff.float() * amplify).clamp(0, 255).to(torch.uint8)
    return Tile(amplified, f"max {int(diff.max())}, mean {float(diff.float().mean()):.2f}")


def run_show(cfg: DictConfig) -> dict[str, Any]:
    """Draw what ``cfg.show`` asks for into ``show.out``; return what was drawn (the
    columns' batches for a preview or a replay)."""
    show = to_spec(cfg.show, ShowSpec)
    out = Path(show.out).expanduser()
    if show.gallery:
        photos = pick_photos(Path(show.photos).expanduser() if show.photos else SHIPPED)
        rows, titles = gallery(photos, show.tile)
        image = draw_grid(rows, [], show.tile, "every registered op on the same photos", titles)
        save_png(image, out)
        print(f"gallery of {len(rows) - 1} ops written to {out}")
        return {"out": out, "rows": titles}
    if show.run is not None:
        shown, where, cfg = replay(show)
        title = (
            f"{show.run}: step {show.step} = epoch {where.epoch}, batch {where.batch}, "
            f"rank {where.rank}"
        )
    else:
        if not to_spec(cfg.data, DataSpec).has_images:
            raise DaliPipesError(
                f"show draws images: data={cfg.data.get('name')} has none; choose another data"
            )
        shown = preview(cfg, show)
        title = f"epoch {show.epoch}, the first {show.samples} samples of the training order"
    augment = to_spec(cfg.augment, AugmentSpec)
    rows, header, titles = grid_rows(shown, augment, show.samples, show.amplify)
    save_png(draw_grid(rows, header, show.tile, title, titles), out)
    samples = min(show.samples, len(shown[0].labels))
    views = f" x {len(shown[0].images)} views" if has_views(shown[0].images) else ""
    print(f"{samples} samples{views} x {len(shown)} backends written to {out}")
    return {"out": out, "shown": shown}


def main() -> None:
    """``python -m dali_pipes.show``."""
    cli.run(run_show, "show")
