"""The fed columns are named once: the feed, the graph and the cache agree by name."""

from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.augment.pipeline import Pipeline
from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends.dali.columns import GEOMETRY, Fed, FedColumns, View
from dali_pipes.backends.dali.graph import fed_nodes

OPS: dict[str, dict[str, object]] = {"hflip": {}, "color_jitter": {"brightness": 0.4}}


def pipeline_of(ops: dict[str, dict[str, object]]) -> Pipeline:
    return AugmentSpec(train=SplitAugment(ops=ops)).pipeline(True)


def test_columns_name_each_op_parameter_with_its_dtype_after_the_geometry() -> None:
    pipeline = pipeline_of(OPS)
    columns = FedColumns.of(pipeline)
    names = [name for name, _ in columns.columns()]
    assert names[:7] == ["images", "labels", *(name for name, _ in GEOMETRY)]
    assert names[7] == "hflip.flip"
    assert all(name.startswith("color_jitter.") for name in names[8:]) and len(names) > 8
    assert [d for _, d in columns.columns()[7:]] == list(pipeline.feed_dtypes)
    assert columns.columns(images=False) == columns.columns()[1:]


def test_a_batch_flattens_and_unflattens_by_name() -> None:
    columns = FedColumns.of(pipeline_of(OPS))
    params = tuple(f"p{k}" for k in range(len(columns.params)))
    fed = Fed("images", "labels", (View("anchor", "shape", "start", "end", "out", params),))
    flat = fed.flat()
    assert len(flat) == len(columns.columns())
    assert columns.unflatten(flat) == fed
    assert columns.unflatten(fed.params(), images="images") == fed


def test_several_views_are_several_groups_of_the_same_columns() -> None:
    columns = FedColumns((("hflip.flip", "bool"),), views=2)
    names = [name for name, _ in columns.columns()]
    assert names == [
        "images",
        "labels",
        *(f"{name}[{v}]" for v in (0, 1) for name in [*(n for n, _ in GEOMETRY), "hflip.flip"]),
    ]
    flat = ["images", "labels", *range(12)]
    fed = columns.unflatten(flat)
    assert [view.flat() for view in fed.views] == [tuple(range(6)), tuple(range(6, 12))]
    assert fed.flat() == tuple(flat)


def test_a_wrong_number_of_columns_is_refused() -> None:
    with pytest.raises(ValueError, match="3 columns after the images, expected 6"):
        FedColumns(()).unflatten(["images", "labels", 1, 2])


def test_the_graphs_external_source_gives_each_named_column_its_dali_type() -> None:
    from nvidia.dali import pipeline_def

    pipeline = pipeline_of(OPS)
    columns = FedColumns.of(pipeline)
    draw = pipeline.draw([[40, 60], [50, 30]], [3, 4], seed=1, epoch=0)
    g = draw.geometry
    anchor, shape = g.decode_window()
    roi_start, roi_end = g.roi()
    out = np.tile(np.asarray(g.out, np.float32), (2, 1))
    view = View(anchor, shape, roi_start, roi_end, out, tuple(pipeline.feed(draw)))
    images = [np.arange(5, dtype=np.uint8), np.arange(7, dtype=np.uint8)]
    fed = Fed(images, np.array([7, 9]), (view,))

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def graph() -> tuple[object, ...]:
        return fed_nodes(lambda: fed.flat(), columns).flat()

    pipe = graph()
    pipe.build()
    got = columns.unflatten([[np.asarray(t) for t in batch] for batch in pipe.run()])
    assert [a.tolist() for a in got.images] == [a.tolist() for a in images]
    assert [int(a) for a in got.labels] == [7, 9]
    for name, dtype in columns.columns():
        assert all(np.asarray(a).dtype.name == dtype for a in column(got, name)), name
    assert np.array_equal(np.stack(got.views[0].roi_end), roi_end)


def column(fed: Fed, name: str) -> list[object]:
    """The samples of column ``name`` of a one-view batch."""
    if name in ("images", "labels"):
        return list(getattr(fed, name))
    names = [n for n, _ in FedColumns.of(pipeline_of(OPS)).columns()[2:]]
    return list(fed.views[0].flat()[names.index(name)])
