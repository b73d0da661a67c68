"""Graph code marked :func:`~dali_pipes.augment.unconverted.unconverted` runs as written
inside a graph with conditionals, its operators in the branch that called it."""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_pipes.augment.unconverted import unconverted


def doubled_by_pairs(x: Any) -> Any:
    """Graph code AutoGraph would rewrite: its ``zip`` takes no ``strict=``."""
    total = x * 0.0
    for a, b in zip((x, x), (1.0, 1.0), strict=True):
        total = total + a * b
    return total


def test_marked_graph_code_runs_as_written_in_the_branch_that_calls_it() -> None:
    from nvidia.dali import fn, pipeline_def, types

    marked = unconverted(doubled_by_pairs)
    values = np.array([[1.0], [2.0], [3.0], [4.0]], dtype=np.float32)

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_conditionals=True)
    def graph() -> Any:
        x = fn.external_source(source=lambda: list(values), dtype=types.FLOAT)
        if fn.reductions.sum(x) > 2.5:  # noqa: SIM108 - a DALI conditional, per sample
            y = marked(x)
        else:
            y = x * -1.0
        return y

    pipe = graph()
    pipe.build()
    (out,) = pipe.run()
    got = np.concatenate([np.asarray(out[k]) for k in range(4)])
    assert got.tolist() == [-1.0, -2.0, 6.0, 8.0]
    assert marked.__name__ == "doubled_by_pairs" and marked.__doc__ == doubled_by_pairs.__doc__
