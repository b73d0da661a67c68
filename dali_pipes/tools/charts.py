"""PNG charts of the measuring tools (matplotlib, drawn off-screen): ``bench``'s images/s
per candidate, ``doctor``'s step timeline and its tuning trials. Each is written beside
the tool's JSON report, from that report alone, so a recorded report can be drawn again."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from dali_pipes.data.files import write_atomic

WIDTH, DPI = 8.0, 100  # inches, dots per inch: charts 800 pixels wide


def _figure(height: float) -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display: draw into memory
    from matplotlib.figure import Figure

    return Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")


def _save(figure: Any, path: Path) -> Path:
    """Write ``figure`` as a PNG to ``path``, whole or not at all."""
    write_atomic(path, lambda f: figure.savefig(f, format="png"), hint="choose another path")
    return path


def _rate(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return math.nan if value is None else float(value)


def bench_chart(report: dict[str, Any], path: Path) -> Path:
    """Images/s of every measured candidate (median, the bar; min-max, the whisker), the
    baseline and the decode ceiling as vertical lines."""
    rows = [r for r in report["results"] if r.get("repeats")]
    by_name = {r["name"]: r for r in rows}
    # the decode ceiling is a line; the synthetic loader (no decoding at all) is far off
    # the scale of real loaders: named in the title instead
    bars = [r for r in rows if r["name"] not in ("decode", "synthetic")]
    figure = _figure(1.2 + 0.45 * max(1, len(bars)))
    ax = figure.subplots()
    names = [r["name"] for r in bars]
    median = [_rate(r, "images_per_s_median") for r in bars]
    low = [m - _rate(r, "images_per_s_min") for m, r in zip(median, bars, strict=True)]
    high = [_rate(r, "images_per_s_max") - m for m, r in zip(median, bars, strict=True)]
    ax.barh(names, median, xerr=[low, high], color="#4c72b0", ecolor="black", capsize=4)
    ax.invert_yaxis()
    for name, color, style in (("baseline", "#dd8452", "--"), ("decode", "#c44e52", ":")):
        if name in by_name:
            value = _rate(by_name[name], "images_per_s_median")
            label = "baseline" if name == "baseline" else "decode ceiling"
            ax.axvline(
                value, color=color, linestyle=style, linewidth=2, label=f"{label} {value:.0f}"
            )
    ax.set_xlabel("images/s (median of repeats; whiskers: min-max)")
    dataset = report.get("dataset", {})
    title = (
        f"bench: {dataset.get('images', '?')} images, batch {report.get('batch_size', '?')}, "
        f"{report.get('machine', {}).get('cores', '?')} cores"
    )
    if "synthetic" in by_name:
        title += f"; synthetic {_rate(by_name['synthetic'], 'images_per_s_median'):.3g} images/s"
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", framealpha=0.9)
    return _save(figure, path)


def timeline_chart(timeline: list[tuple[float, float]], title: str, path: Path) -> Path:
    """Each training step's time split into compute and waiting for data, stacked."""
    figure = _figure(3.6)
    ax = figure.subplots()
    steps = list(range(len(timeline)))
    wait = [1000 * w for w, _ in timeline]
    compute = [1000 * max(0.0, total - w) for w, total in timeline]
    ax.bar(steps, compute, color="#4c72b0", label="compute (step minus data wait)", width=0.9)
    ax.bar(steps, wait, bottom=compute, color="#c44e52", label="waiting for data", width=0.9)
    ax.set_xlabel("training step")
    ax.set_ylabel("ms")
    ax.set_title(title)
    ax.legend(loc="upper right")
    return _save(figure, path)


def trials_chart(report: dict[str, Any], path: Path) -> Path:
    """The tuning trials in order, images/s each, the kept setting highlighted."""
    trials = report["trials"]
    backend = report["backend"]
    labels = []
    for k, trial in enumerate(trials):
        changed = [
            f"{key}={trial[key]}" for key in backend if key in trial and trial[key] != backend[key]
        ]
        labels.append("configured" if k == 0 else ", ".join(changed) or "configured")
    tuned = report.get("tuned", {})
    rates = [float(t["images_per_s"]) for t in trials]
    kept = [all(t.get(key) == value for key, value in tuned.items()) for t in trials]
    figure = _figure(1.2 + 0.35 * max(1, len(trials)))
    ax = figure.subplots()
    colors = ["#55a868" if keep else "#4c72b0" for keep in kept]
    ax.barh(labels, rates, color=colors)
    ax.invert_yaxis()
    ax.set_xlabel("images/s (green: the setting written to the tuned config)")
    ax.set_title(f"doctor: tuning backend={backend.get('name')} ({report.get('model', '?')})")
    return _save(figure, path)
