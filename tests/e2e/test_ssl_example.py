"""examples/self_supervised.py runs end to end: SimCLR with the small CNN on the sample
data, fed by dali_pipes' views, learns features whose k-NN accuracy on the held-out split
beats the same network untrained by a clear margin.

A shorter run than the documented one (docs/how-to/self-supervised.md), stated here: fewer
epochs on a smaller copy of the sample data, so the test stays within a couple of minutes
on two cores; the documented run's figures are in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from helpers.warm import python

#: The test's shorter run: what it trains on and for how long.
SHORT = ["--epochs", "8", "data.train_per_class=60", "data.val_per_class=30", "data.batch_size=32"]
#: The margin, in accuracy points, by which the trained features must beat the untrained.
MARGIN = 0.10


@pytest.mark.slow
def test_the_example_learns_features_that_beat_the_untrained_network(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    done = subprocess.run(
        [python(), str(REPO / "examples" / "self_supervised.py"), "--out", str(out), *SHORT],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["train_images"] == 360 and result["val_images"] == 180
    print(f"\nk-NN: untrained {result['knn_untrained']:.3f}, trained {result['knn_trained']:.3f}")
    assert result["knn_trained"] >= result["knn_untrained"] + MARGIN, result
    assert result["losses"][-1] < result["losses"][0], result["losses"]
