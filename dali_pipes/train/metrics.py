"""Accuracy, and where per-epoch figures go: a summary line, metrics.csv, TensorBoard."""

from __future__ import annotations

import csv
import io
import logging
import math
from pathlib import Path
from typing import Any

import torch

from dali_pipes.data.files import write_text

log = logging.getLogger("dali_pipes.train")


@torch.no_grad()
def correct_topk(logits: torch.Tensor, labels: torch.Tensor, ks: tuple[int, ...]) -> list[float]:
    """Number of samples whose label is among the top-k predictions, for each k."""
    top = logits.topk(min(max(ks), logits.shape[1]), dim=1).indices
    hits = top.eq(labels.view(-1, 1))
    return [float(hits[:, :k].any(dim=1).sum()) for k in ks]


class MetricsLog:
    """Rank 0 only: one row per epoch in metrics.csv, and TensorBoard scalars.

    metrics.csv is rewritten whole at every epoch (:mod:`dali_pipes.data.files`) and holds
    exactly one row per finished epoch: a run that starts at epoch ``e`` (resumed, or redoing
    an epoch whose checkpoint failed) first drops the rows of epochs ``>= e``, and the row of
    an epoch is written before its checkpoint, so a resumed run never repeats or loses one.
    """

    def __init__(self, directory: Path, start_epoch: int = 0) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.csv_path = directory / "metrics.csv"
        self.rows = [r for r in self._read() if int(r["epoch"]) < start_epoch]
        if self.csv_path.exists():
            self._save()
        self.writer = SummaryWriter(log_dir=str(directory / "tensorboard"))

    def _read(self) -> list[dict[str, Any]]:
        try:
            with self.csv_path.open(newline="") as f:
                return list(csv.DictReader(f))
        except FileNotFoundError:
            return []

    def _save(self) -> None:
        fields = list(dict.fromkeys(k for row in self.rows for k in row))
        buffer = io.StringIO()
        out = csv.DictWriter(buffer, fieldnames=fields, restval="")
        out.writeheader()
        out.writerows(self.rows)
        write_text(self.csv_path, buffer.getvalue(), hint="free space or choose another output_dir")

    def write(self, row: dict[str, Any]) -> None:
        """Add one epoch's row to metrics.csv and TensorBoard."""
        self.rows.append(row)
        self._save()
        for key, value in row.items():
            if key != "epoch" and isinstance(value, (int, float)):
                self.writer.add_scalar(key, value, global_step=int(row["epoch"]))
        self.writer.flush()

    def images(self, tag: str, pixels: torch.Tensor, step: int, most: int = 32) -> None:
        """Up to ``most`` images of a uint8 ``[N, C, H, W]`` batch (C: 3, or 1: grey) to
        TensorBoard."""
        self.writer.add_images(tag, pixels[:most], global_step=step, dataformats="NCHW")
        self.writer.flush()

    def close(self) -> None:
        """Flush and close TensorBoard's writer."""
        self.writer.close()


#: The figures an epoch's line shows, in this order, where the row has them.
SHOWN = (
    "train_loss",
    "train_top1",
    "train_pixel_acc",
    "val_loss",
    "val_top1",
    "val_top5",
    "val_map",
    "val_map50",
    "val_mask_map",
    "val_miou",
    "val_pixel_acc",
)


def summary_line(row: dict[str, Any]) -> str:
    """An epoch's row as the one line the log prints."""
    parts = [f"epoch {row['epoch']}"]
    for key in SHOWN:
        if key in row:
            parts.append(f"{key} {row[key]:.4f}")
    parts.append(f"{row['images_per_s']:.0f} img/s")
    parts.append(f"data wait {100 * row['data_wait']:.1f}%")
    parts.append(f"lr {row['lr']:.5f}")
    if row.get("skipped"):
        parts.append(f"{row['skipped']} bad files skipped")
    return " | ".join(parts)


def epoch_row(
    epoch: int,
    lr: float,
    tr: tuple[float, float | None, float],
    va: dict[str, float],
    wait: float,
    secs: float,
    world: int,
    ema: dict[str, float] | None = None,
    task: Any = None,
) -> dict[str, Any]:
    """An epoch's metrics row from the sums over ranks: the training loss (and the task's
    training figure, ``task.train_figure``: top-1 by default), the validation figures (and
    the EMA weights'), images/s and the data wait."""
    loss_sum, correct, samples = tr
    figure = "top1" if task is None else task.train_figure
    row: dict[str, Any] = {"epoch": epoch, "lr": lr, "train_loss": safe_div(loss_sum, samples)}
    if figure is not None and correct is not None:
        row[f"train_{figure}"] = safe_div(correct, samples)
    row |= {f"val_{name}": value for name, value in va.items()}
    if ema is not None:  # the EMA weights on the same validation set
        row |= {f"ema_val_{name}": value for name, value in ema.items()}
    return row | {
        "samples": int(samples),
        "images_per_s": safe_div(samples, secs),
        "data_wait": safe_div(wait, secs * world),
        "epoch_seconds": secs,
    }


def epoch_summary(row: dict[str, Any]) -> str:
    """The epoch's summary line, with the EMA model's validation figures when there is one."""
    keys = [k for k in row if k.startswith("ema_val_")]
    return " | ".join([summary_line(row), *(f"{k} {row[k]:.4f}" for k in keys)])


def run_summary(
    rows: list[dict[str, Any]], wall_seconds: float, out: Path, headline: str = "val_top1"
) -> str:
    """The one line a finished run ends with: final and best validation figure
    (``headline``: top-1, or a task's mAP or mean IoU), the time it took, the share of it
    spent waiting for data, and where its outputs are.

    ``rows`` are every epoch's metrics (those read back from metrics.csv after a resume
    hold strings); the data wait is the epochs' own, weighted by their length."""
    top1 = [float(r[headline]) for r in rows]
    best = max(range(len(rows)), key=lambda i: (top1[i], -i))  # the first best epoch
    secs = [float(r["epoch_seconds"]) for r in rows]
    waited = sum(float(r["data_wait"]) * t for r, t in zip(rows, secs, strict=True))
    wait = safe_div(waited, sum(secs))
    minutes, seconds = divmod(round(wall_seconds), 60)
    return (
        f"done: {len(rows)} epochs | {headline} {100 * top1[-1]:.2f}% at the end, best "
        f"{100 * top1[best]:.2f}% (epoch {rows[best]['epoch']}) | {minutes}:{seconds:02d} wall, "
        f"data wait {100 * wait:.1f}% | outputs in {out} (train.log, metrics.csv, "
        f"checkpoints/, tensorboard/)"
    )


def safe_div(a: float, b: float) -> float:
    """``a / b``, NaN for an empty denominator (an epoch with no samples)."""
    return a / b if b else math.nan
