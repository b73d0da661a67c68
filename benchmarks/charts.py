"""Draw a recorded ``bench`` or ``doctor`` report's charts again from its JSON alone.

    python benchmarks/charts.py benchmarks/bench-cpu-imagenet-like.json docs/img/bench-cpu.png
    python benchmarks/charts.py outputs/doctor/doctor.json outputs/doctor/

A bench report gives one chart (images/s per candidate); a doctor report its step
timeline (when it recorded one) and its tuning trials (when it tuned), into the folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dali_pipes.tools.charts import bench_chart
from dali_pipes.tools.doctor import charts


def main(report_path: str, out: str) -> None:
    """Draw the charts of the report at ``report_path`` to ``out``."""
    report = json.loads(Path(report_path).read_text())
    if "results" in report:
        print(bench_chart(report, Path(out)))
    else:
        for path in charts(report, Path(out)):
            print(path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
