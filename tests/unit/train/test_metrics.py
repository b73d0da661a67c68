"""The line a finished run ends with: final and best top-1, wall time, data wait and
where the outputs are, from every epoch's row (also those read back after a resume)."""

from __future__ import annotations

from pathlib import Path

from dali_pipes.train.metrics import run_summary


def row(epoch: int, top1: float, wait: float, seconds: float) -> dict[str, object]:
    return {"epoch": epoch, "val_top1": top1, "data_wait": wait, "epoch_seconds": seconds}


def test_the_summary_names_the_final_and_the_first_best_epoch_and_the_weighted_wait() -> None:
    rows = [
        row(0, 0.5, 0.5, 1.0),
        row(1, 0.9, 0.1, 3.0),
        row(2, 0.9, 0.0, 4.0),
        row(3, 0.8, 0.0, 2.0),
    ]
    line = run_summary(rows, wall_seconds=75.4, out=Path("outputs/x"))
    assert line == (
        "done: 4 epochs | val_top1 80.00% at the end, best 90.00% (epoch 1) | 1:15 wall, "
        "data wait 8.0% | outputs in outputs/x (train.log, metrics.csv, checkpoints/, "
        "tensorboard/)"
    )


def test_rows_read_back_from_metrics_csv_as_strings_are_summed_up_alike() -> None:
    as_read = [{k: str(v) for k, v in row(e, 0.25 * e, 0.2, 2.0).items()} for e in range(3)]
    line = run_summary(as_read, wall_seconds=5, out=Path("o"))
    assert "val_top1 50.00% at the end, best 50.00% (epoch 2) | 0:05 wall, data wait 20.0%" in line
