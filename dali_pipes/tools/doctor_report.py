"""What ``python -m dali_pipes.doctor`` prints: its report (:mod:`dali_pipes.tools.doctor`) as
lines on the terminal, the placements as a short table."""

from __future__ import annotations

from typing import Any


def summary(report: dict[str, Any]) -> str:
    """The report as the lines printed on the terminal."""
    lines = [
        f"model {report['model']} on {report.get('model_device', '?')}, "
        f"backend {report['backend']['name']} "
        f"(device {report['backend']['device']}), batch {report['batch_size']}",
        f"  {report.get('ceiling_data', 'synthetic on-device data'):<25}: "
        f"{report['synthetic_images_per_s']:.0f} img/s (the ceiling)",
        f"  fed by the loader        : {report['loader_images_per_s']:.0f} img/s "
        f"= {100 * report['loader_vs_synthetic']:.0f}% of the ceiling, "
        f"{100 * report['data_wait']:.0f}% of the time waiting for data",
    ]
    if "placements" in report:
        lines += placement_table(report)
    if "tuned" in report:
        changed = {k: v for k, v in report["tuned"].items() if report["backend"].get(k) != v}
        lines.append(
            f"  tuned                    : {report['tuned_images_per_s']:.0f} img/s "
            f"= {100 * report['tuned_vs_synthetic']:.0f}% of the ceiling "
            f"with {changed or 'no changes'}"
        )
        lines.append(f"  settings written to {report['tuned_config']}")
    return "\n".join(lines)


def placement_table(report: dict[str, Any]) -> list[str]:
    """The placements as a short table, then the one to use and why."""
    lines = [
        f"  placements (ceiling {report['placement_ceiling_images_per_s']:.0f} img/s on "
        f"{report['placement_model_device']}):",
        f"    {'placement':<22} {'img/s':>8} {'ceiling':>8} {'wait':>6}",
    ]
    for row in report["placements"]:
        if row["images_per_s"] is None:
            lines.append(f"    {row['name']:<22} {row['note']}")
            continue
        lines.append(
            f"    {row['name']:<22} {row['images_per_s']:>8.0f} "
            f"{100 * row['vs_ceiling']:>7.0f}% {100 * row['data_wait']:>5.0f}%"
            + ("  (configured)" if row["note"] == "configured" else "")
        )
    pick = report["recommended_placement"]
    if pick is None:
        lines.append("  no placement could be measured on this machine")
    elif pick["fed"]:
        lines.append(f"  use {pick['overrides']}: the fastest, and it keeps the model fed")
    else:
        lines.append(
            f"  use {pick['overrides']}: the fastest, but no placement keeps the model fed "
            f"(best {100 * pick['vs_ceiling']:.0f}% of the ceiling): training is input-bound"
        )
    return lines
