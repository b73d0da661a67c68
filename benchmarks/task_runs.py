"""Record and check the default detection and segmentation jobs: each task's ``python -m
dali_pipes.train task=<task>`` run as a user runs it, its epoch rows and wall time written
with the machine, versions, date, command and commit to ``benchmarks/train-task-<task>.json``.

Each run is checked, and the command exits 1 when a check fails: its final figure must
stand :data:`MARGIN` above the same model untrained (built with the run's seed and
evaluated on the same validation images before any step), and at most :data:`TOLERANCE`
below the figure recorded before (the JSON it replaces; with ``--out``-only runs, nothing
is replaced). ``make check-tasks`` runs both.

    python benchmarks/task_runs.py                    # both tasks
    python benchmarks/task_runs.py segmentation       # one
    python benchmarks/task_runs.py detection --out /tmp/runs -- seed=1
    python benchmarks/task_runs.py detection --nproc 2 -- data.batch_size=4

Overrides after ``--`` go to every run (the record names them). ``--nproc N`` runs the job
under ``torchrun --standalone --nproc_per_node=N`` (DDP on the CPU: gloo) and writes
``train-task-<task>-ddp<N>.json``; with ``data.batch_size`` divided by N the global batch,
the learning rate and the steps per epoch are the single process's.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dali_pipes.tools.bench import environment

HERE = Path(__file__).resolve().parent
#: Each task's headline validation figure (the run's summary line reports it).
HEADLINE = {"detection": "val_map", "segmentation": "val_miou"}
#: How far above the untrained model a default job must end (box mAP; mean IoU).
MARGIN = {"detection": 0.5, "segmentation": 0.5}
#: How far below its recorded figure a rerun may end (seeds and machines move it a little).
TOLERANCE = 0.05


def untrained(task: str, overrides: list[str]) -> float:
    """The task's headline figure for its model as built before training (the run's seed,
    one process), evaluated by the task on the run's validation split."""
    import torch

    from dali_pipes import build_loader, compose_config
    from dali_pipes.config.specs import seed_of
    from dali_pipes.train.state import build_state, trainer_spec

    cfg = compose_config([f"task={task}", *overrides])
    torch.manual_seed(seed_of(cfg))  # as the trainer seeds rank 0 before building the model
    with build_loader(cfg, "train") as train, build_loader(cfg, "val") as val:
        state = build_state(cfg, trainer_spec(cfg.trainer), train, torch.device("cpu"), True)
        evaluated = state.task.evaluate(state.net, val, state.step)
    records = evaluated.records()
    figures = evaluated.figures(evaluated.sums, [] if records is None else [records])
    return float(figures[HEADLINE[task].removeprefix("val_")])


def verdict(made: dict[str, object], before: dict[str, object] | None) -> list[str]:
    """What the run fails of its checks (empty: it passes them)."""
    task, final = str(made["task"]), float(made["final"])  # type: ignore[arg-type]
    floor = float(made["untrained"]) + MARGIN[task]  # type: ignore[arg-type]
    failed = []
    if final < floor:
        failed.append(f"{made['figure']} {final:.4f} < untrained + {MARGIN[task]} = {floor:.4f}")
    if before is not None and final < float(before["final"]) - TOLERANCE:  # type: ignore[arg-type]
        failed.append(
            f"{made['figure']} {final:.4f} is more than {TOLERANCE} below the recorded "
            f"{float(before['final']):.4f} ({before.get('commit')})"  # type: ignore[arg-type]
        )
    return failed


def record(task: str, out: Path, overrides: list[str], nproc: int = 1) -> dict[str, object]:
    """Run the task's default job into ``out`` (under torchrun with ``nproc`` > 1) and
    return its record."""
    launcher = [sys.executable, "-m", "dali_pipes.train"]
    shown = ["python -m dali_pipes.train"]
    if nproc > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        launcher += [f"--nproc_per_node={nproc}", "-m", "dali_pipes.train"]
        shown = [f"torchrun --standalone --nproc_per_node={nproc} -m dali_pipes.train"]
    command = [*launcher, f"task={task}", *overrides]
    started = time.perf_counter()
    done = subprocess.run([*command, f"output_dir={out}"], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"task={task} failed ({done.returncode}): {done.stderr[-2000:]}")
    with (out / "metrics.csv").open() as f:
        rows = [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]
    figure = HEADLINE[task]
    values = [float(r[figure]) for r in rows]  # type: ignore[arg-type]
    return {
        **environment(),
        "untrained": untrained(task, overrides),
        "command": " ".join([*shown, f"task={task}", *overrides]),
        "processes": nproc,
        "task": task,
        "figure": figure,
        "final": values[-1],
        "best": max(values),
        "best_epoch": values.index(max(values)),
        "wall_seconds": wall,
        "summary": done.stderr.strip().splitlines()[-1],
        "rows": rows,
    }


def _number(value: str) -> object:
    try:
        return float(value)
    except ValueError:
        return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Checked below, not with choices=: argparse checks an empty list against the choices.
    parser.add_argument("tasks", nargs="*", help=f"{' and/or '.join(HEADLINE)} (default: both)")
    parser.add_argument("--out", type=Path, default=None, help="runs' folder (default: temp)")
    parser.add_argument("--nproc", type=int, default=1, help="processes (torchrun) per run")
    args, overrides = parser.parse_known_args()
    overrides = [o for o in overrides if o != "--"]
    unknown = [t for t in args.tasks if t not in HEADLINE]
    if unknown:
        parser.error(f"unknown task {unknown[0]!r}: choose from {', '.join(HEADLINE)}")
    base = args.out or Path(tempfile.mkdtemp(prefix="task-runs-"))
    failed = []
    for task in args.tasks or list(HEADLINE):
        made = record(task, base / task, overrides, args.nproc)
        path = HERE / f"train-task-{task}{f'-ddp{args.nproc}' if args.nproc > 1 else ''}.json"
        before = json.loads(path.read_text()) if path.exists() else None
        path.write_text(json.dumps(made, indent=2) + "\n")
        print(f"task={task}: {made['figure']} {made['final']:.4f} at the end (untrained "
              f"{made['untrained']:.4f}), best {made['best']:.4f} (epoch {made['best_epoch']}), "
              f"{made['wall_seconds']:.0f} s; {path}")  # fmt: skip
        failed += [f"task={task}: {line}" for line in verdict(made, before)]
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
