"""What to try next, after ``bench`` and ``doctor`` print their figures.

Both commands answer a question a user asks ("does dali_pipes help on my machine?", "is
my training waiting for data?"); the figures alone leave the user to work out the answer
and the next step. These functions turn a report into a few plain lines: the answer first,
then the changes worth trying, most promising first, each as the overrides to type.
"""

from __future__ import annotations

import math
from typing import Any

#: ``doctor``: a model fed at this share of its synthetic-data rate or more is not
#: waiting for data in any way worth a change of loader (the project's GPU target).
FED = 0.97
#: ``doctor``: fed faster than on synthetic data by more than this, the two measurements
#: did not see the same machine (a busy machine, too few steps): no verdict can be drawn.
NOISE = 1.05

#: ``bench``: our loaders, fastest first when they tie; the baseline users would write.
OURS = ("dali-gpu", "dali-cpu", "torch")
BASELINE = "baseline"

#: Where the docs explain the figures and the fixes (a heading of the how-to guide).
GUIDE = "docs: How-to guides > Is training waiting for data?"


def _rate(row: dict[str, Any] | None) -> float:
    value = None if row is None else row.get("images_per_s_median")
    return math.nan if value is None else float(value)


def bench_advice(report: dict[str, Any]) -> list[str]:
    """What ``bench``'s table means for this machine, and what to run next."""
    rows = {row["name"]: row for row in report["results"]}
    base = _rate(rows.get(BASELINE))
    measured = [(name, _rate(rows[name])) for name in OURS if name in rows]
    measured = [(name, rate) for name, rate in measured if not math.isnan(rate)]
    lines = []
    if measured and not math.isnan(base):
        name, rate = max(measured, key=lambda item: item[1])
        if rate >= base:
            lines.append(
                f"fastest here: {name}, {rate / base:.2f}x the DataLoader baseline "
                f"({rate:.0f} against {base:.0f} images/s)"
            )
        else:
            lines.append(
                f"the DataLoader baseline is faster here than every dali_pipes loader "
                f"(best: {name}, {rate / base:.2f}x): keep your DataLoader on this machine, "
                f"and please report it with python -m dali_pipes.selfcheck's report"
            )
    gpu = rows.get("dali-gpu")
    if gpu is not None and math.isnan(_rate(gpu)):
        lines.append(
            "no GPU here: on a GPU machine, backend=dali decodes on the GPU; run bench there too"
        )
    lines.append(
        "whether training gets faster depends on your model: run python -m dali_pipes.doctor "
        "with your training overrides to see how long each step waits for data"
    )
    return lines


def doctor_advice(report: dict[str, Any], data: dict[str, Any], cuda: bool) -> list[str]:
    """The answer to "is training waiting for data?" and the changes worth trying.

    ``data`` is the run's ``data`` config (its ``name`` and ``cache``); ``cuda`` whether
    this machine has a GPU."""
    share = float(report["loader_vs_synthetic"])
    wait = float(report["data_wait"])
    replayed = report.get("ceiling_data") == "one loader batch replayed"
    rate = "rate on one loader batch replayed" if replayed else "synthetic-data rate"
    if share > NOISE:
        return [
            f"the measurement is too noisy to tell: fed by the loader the step ran at "
            f"{100 * share:.0f}% of its {rate}, which cannot be; run doctor "
            f"again on a quiet machine, with more steps (doctor.steps=100)"
        ]
    if share >= FED:
        return [
            f"training is not waiting for data ({100 * share:.0f}% of the {rate}): a "
            f"faster loader will not make it faster; look at the model step "
            f"(batch size, trainer.amp, trainer.channels_last, trainer.compile)"
        ]
    lines = [
        f"training waits for data {100 * wait:.0f}% of the time and runs at "
        f"{100 * share:.0f}% of its {rate}; try, in this order:"
    ]
    tuned = report.get("tuned_images_per_s")
    if tuned is not None and tuned > float(report["loader_images_per_s"]) * 1.03:
        folder = str(report["tuned_config"]).rsplit("/backend/", 1)[0]
        name = f"{report['backend']['name']}_tuned"
        lines.append(
            f"  - the tuned settings: python -m dali_pipes.train --config-dir {folder} "
            f"backend={name}"
        )
    pick = report.get("recommended_placement")
    if pick and pick.get("note") != "configured" and pick.get("overrides"):
        lines.append(f"  - the fastest placement measured: {pick['overrides']}")
    if not cuda:
        lines.append(
            "  - a GPU: here the loader and the model share the CPU cores; on a GPU machine "
            "backend=dali decodes and augments on the GPU"
        )
    if data.get("name") in ("folder", "imagenet"):
        lines.append(
            "  - many small files: pack them into shards once (python -m dali_pipes.pack), "
            "then train with data=shards"
        )
    if data.get("cache") is None:
        lines.append(
            "  - a dataset that fits in memory: data.cache=ram decodes each image once, "
            "not every epoch"
        )
    lines.append(f"  ({GUIDE})")
    return lines
