"""Every GPU graph dali_pipes can build, checked on a machine without a GPU.

DALI validates a graph while it is defined and traced, which needs no CUDA; only building
it does. Each graph of :func:`dali_pipes.selfcheck.graphs.gpu_graphs` is defined for GPU 0,
traced, and its operators held against DALI's registry and the devices the loader
promises (:mod:`dali_pipes.backends.dali.trace`). The mistakes that used to surface only on
a GPU are injected one by one, each on a path only the GPU graph takes, and each is caught.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import BUNDLED_PHOTOS, SUMMARY, TESTS
from helpers.shards import pack

from dali_pipes.augment import dali_ops
from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.base import op_names
from dali_pipes.backends.dali.graph import DaliGraph, GraphDevices
from dali_pipes.backends.dali.trace import GraphCheck, TracedGraph, TracedOp, problems
from dali_pipes.selfcheck.graphs import GraphCase, gpu_graphs, presets

PLUGINS = TESTS / "plugins"
CASES = gpu_graphs(BUNDLED_PHOTOS)
#: The ops registered when CASES was listed (a test may register a user's op later).
OPS = op_names(crop=False)
GPU = GraphDevices.gpu(0)
FOLDER = ("data=folder", f"data.root={BUNDLED_PHOTOS}", "data.batch_size=8")


def failed(result: GraphCheck) -> str:
    return f"{result.label}: " + "; ".join(result.problems)


@pytest.mark.parametrize("case", CASES, ids=[case.label for case in CASES])
def test_every_gpu_graph_defines_traces_and_checks_out_without_a_gpu(case: GraphCase) -> None:
    result = case.check()
    assert result.ok, failed(result)
    assert result.graph is not None and result.graph.device_id == case.devices.device_id


def test_the_traced_graphs_cover_every_preset_option_op_and_the_yardstick(
    record_property: Callable[[str, object], None],
) -> None:
    labels = {case.label for case in CASES}
    for preset in presets():
        for split in ("train", "val"):
            name = f"augment={preset} {split}"
            assert {name, f"{name}, dali-cpu -> GPU", f"{name}, data.cache=gpu"} <= labels
    assert {f"op {op} alone" for op in OPS} <= labels and len(OPS) >= 7
    options = [label for label in labels if label.startswith("backend.roi_decode=")]
    assert len(options) == 24  # roi_decode x fancy_upsampling x hw_decoder_load, + decoder
    assert sum("example pipeline" in label for label in labels) == 2
    kinds = Counter(case.kind for case in CASES)
    places = Counter(case.devices.describe() for case in CASES)
    record_property(
        SUMMARY,
        f"GPU graph trace: {len(CASES)} graphs traced (2 more over a pack), "
        f"{len(presets())} presets; by kind {dict(kinds)}; by placement {dict(places)}",
    )


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shards")
    pack(BUNDLED_PHOTOS, out, "pack.shard_size_mb=0.3")
    return out


def test_a_packed_datasets_gpu_graphs_check_out(shards: Path) -> None:
    cases = [case for case in gpu_graphs(BUNDLED_PHOTOS, shards) if "shards" in case.label]
    assert len(cases) == 2
    for case in cases:
        result = case.check()
        assert result.ok, failed(result)


def test_a_user_op_from_outside_the_package_checks_out_on_the_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    user = ("augment.imports=[custom_ops]", "+augment.train.ops.random_invert={p: 0.5}")
    result = GraphCase("random_invert (tests/plugins)", GPU, (*FOLDER, *user)).check()
    assert result.ok, failed(result)
    assert result.graph is not None and result.graph.devices()["gpu"] > 2


# --------------------------------------------------------------------------- injected mistakes

RANDAUGMENT = ("augment=randaugment",)


def check_both(*overrides: str) -> tuple[GraphCheck, GraphCheck]:
    """The CPU graph (which must stay sound) and the GPU graph of the same config."""
    config = (*FOLDER, *overrides)
    return (
        GraphCase("cpu", GraphDevices.cpu(), config).check(),
        GraphCase("gpu", GPU, config).check(),
    )


def test_an_unknown_argument_on_a_branch_only_the_gpu_graph_takes_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Equalize is ``fn.equalize`` only in the GPU's graph (the CPU runs the slot kernel)."""

    def misspelt(images: Any) -> Any:
        from nvidia.dali import fn, types

        misspelt: dict[str, Any] = {"chanels": 3}  # no such argument
        return dali_ops.pixels(fn.equalize(fn.cast(images, dtype=types.UINT8), **misspelt))

    monkeypatch.setattr(dali_ops, "equalize", misspelt)
    cpu, gpu = check_both(*RANDAUGMENT)
    assert cpu.ok, failed(cpu)
    assert not gpu.ok and gpu.graph is None
    assert "chanels" in gpu.problems[0] and "Equalize" in gpu.problems[0], gpu.problems


def test_a_gpu_node_given_as_a_named_argument_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    affine = dali_ops.affine

    def matrix_on_the_gpu(images: Any, matrix: Any, interpolation: str, fill: int) -> Any:
        return affine(images, matrix.gpu(), interpolation, fill)

    monkeypatch.setattr(dali_ops, "affine", matrix_on_the_gpu)
    cpu, gpu = check_both(*RANDAUGMENT)
    assert cpu.ok, failed(cpu)
    assert not gpu.ok and "Named arguments must be on CPU" in gpu.problems[0], gpu.problems


def test_the_slot_kernel_placed_in_the_gpu_graph_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numba kernel of the CPU's slots, given the GPU graph's images."""
    from dali_pipes.augment.auto import kernel as slot_kernel

    def kernel_everywhere(images: Any, p: Any, prefix: str, *args: Any) -> Any:
        return slot_kernel.apply(images, p[f"{prefix}packed"])

    monkeypatch.setattr(auto, "dali_slot", kernel_everywhere)
    cpu, gpu = check_both(*RANDAUGMENT)
    assert cpu.ok, failed(cpu)
    assert not gpu.ok and "slot kernel is a CPU kernel" in gpu.problems[0], gpu.problems


def test_the_compiled_resize_placed_in_the_gpu_graph_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CPU graph's resize is a python_function: on the GPU's images it is refused."""

    def compiled_everywhere(self: DaliGraph, images: Any, *roi: Any) -> Any:
        return dali_ops.cpu_kernel("the compiled resize", images, *roi, function=lambda *a: a)

    monkeypatch.setattr(DaliGraph, "_resize", compiled_everywhere)
    gpu = GraphCase("gpu", GPU, FOLDER).check()
    assert not gpu.ok and "compiled resize is a CPU kernel" in gpu.problems[0], gpu.problems


def test_a_python_or_numba_kernel_on_the_gpu_is_named_by_the_check() -> None:
    """What tracing alone would accept where cupy or numba.cuda is installed."""
    graph = TracedGraph(
        device_id=0,
        ops=(TracedOp("__NumbaFunction_7", "NumbaFuncImpl", "NumbaFunction", "gpu", ("gpu",), ()),),
        outputs=("gpu", "gpu"),
    )
    found = problems(graph, GPU, decodes=False)
    assert found == [
        "NumbaFuncImpl (__NumbaFunction_7) on gpu: a Python/numba kernel placed on the GPU"
    ]


def test_a_mixed_decoder_fed_from_the_gpu_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    decode = DaliGraph.decode

    def fed_from_the_gpu(
        self: DaliGraph, encoded: Any, anchor: Any, shape: Any, before: Any = None
    ) -> Any:
        return decode(self, encoded.gpu(), anchor, shape)

    monkeypatch.setattr(DaliGraph, "decode", fed_from_the_gpu)
    gpu = GraphCase("gpu", GPU, FOLDER).check()
    assert not gpu.ok and "incompatible device" in gpu.problems[0], gpu.problems


def test_an_operator_without_a_gpu_implementation_placed_on_the_gpu_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DALI traces a decoder placed on ``gpu`` and fails only when building it: the
    registry check names it."""
    from nvidia.dali import fn

    def decoder_on_the_gpu(
        self: DaliGraph, encoded: Any, anchor: Any, shape: Any, before: Any = None
    ) -> Any:
        decoded = fn.decoders.image(encoded.gpu(), device="gpu")
        return fn.slice(
            decoded, anchor, shape, axis_names="WH", normalized_anchor=False, normalized_shape=False
        )

    monkeypatch.setattr(DaliGraph, "decode", decoder_on_the_gpu)
    gpu = GraphCase("gpu", GPU, FOLDER).check()
    assert gpu.graph is not None  # DALI itself accepted it
    assert any("no gpu implementation" in p and "decoders__Image" in p for p in gpu.problems)


def test_outputs_on_the_wrong_device_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """dali-cpu promises GPU batches: a graph that forgets DALI's copy is refused."""
    handover = GraphDevices("cpu", "cpu", "gpu", 0)
    monkeypatch.setattr(GraphDevices, "copies_to_gpu", property(lambda self: False))
    result = GraphCase("dali-cpu", handover, FOLDER).check()
    assert not result.ok and any("outputs on" in p for p in result.problems), result.problems


# --------------------------------------------------------------------------- graph devices


@pytest.mark.parametrize(
    ("made", "model", "expected"),
    [
        ("cpu", "cpu", GraphDevices.cpu()),
        ("cuda:1", "cuda:1", GraphDevices("gpu", "gpu", "gpu", 1)),
        ("cpu", "cuda:0", GraphDevices("cpu", "cpu", "gpu", 0)),
    ],
)
def test_a_loaders_placement_picks_its_graph(made: str, model: str, expected: GraphDevices) -> None:
    import torch

    assert GraphDevices.for_loader(torch.device(made), torch.device(model)) == expected


def test_graph_devices_that_cannot_be_are_refused() -> None:
    from dali_pipes.errors import DaliPipesError

    for devices in (("cpu", "gpu", "gpu", 0), ("gpu", "gpu", "cpu", 0), ("gpu", "cpu", "cpu", 0)):
        with pytest.raises(DaliPipesError, match="inconsistent"):
            GraphDevices(*devices)
    twin = GraphDevices.twin()
    assert twin.is_twin and twin.gpu_graph and not twin.on_gpu and twin.device_id is None


def test_a_checked_graph_is_defined_without_origin_stacks_and_the_switch_is_restored() -> None:
    """DALI's private switch (``dali_trace``) is what :func:`trace.origins_not_recorded`
    turns off while a graph is checked: an operator defined under it records no stack (the
    ``_origin_stack_*`` arguments of its spec), one defined after it does again, and a
    refusal still names what went wrong."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali._utils import dali_trace

    from dali_pipes.backends.dali.trace import check, origins_not_recorded

    def define() -> Any:
        @pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe() -> Any:
            return fn.cast(fn.external_source(name="x"), dtype=types.FLOAT)

        return pipe()

    def recorded(pipe: Any) -> set[bool]:
        pipe._build_graph()
        return {"_origin_stack_filename" in str(op._spec) for op in pipe._ops}

    assert dali_trace.is_tracing_enabled()
    with origins_not_recorded():
        assert not dali_trace.is_tracing_enabled()
        untraced = define()
    assert dali_trace.is_tracing_enabled()
    assert recorded(untraced) == {False} and recorded(define()) == {True}
    result = check("cpu", GraphDevices.cpu(), define, decodes=False)
    assert result.ok and dali_trace.is_tracing_enabled(), result.problems

    def refused() -> Any:
        raise ValueError("no such graph")

    failure = check("cpu", GraphDevices.cpu(), refused)
    assert failure.problems and "ValueError: no such graph" in failure.problems[0]
    assert dali_trace.is_tracing_enabled()


@pytest.fixture(scope="module")
def sample_objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from dali_pipes.data.sample_objects import ensure_sample_objects

    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 8, 8)


@pytest.mark.parametrize("split", ["train", "val"])
@pytest.mark.parametrize("preset", ["small", "ssd", "lsj", "detr", "hflip"])
@pytest.mark.parametrize(
    "devices", [GPU, GraphDevices("cpu", "cpu", "gpu", 0)], ids=["gpu", "dali-cpu -> GPU"]
)
def test_the_detection_graph_moves_its_masks_where_the_images_go_without_a_gpu(
    split: str, preset: str, devices: GraphDevices, sample_objects: Path
) -> None:
    """Data with instance masks: the masks' slice, nearest resize and flip are traced on
    the images' device, and their output is handed over on the GPU (the detection
    presets' graphs among them)."""
    overrides = (
        "data=coco",
        f"data.root={sample_objects}",
        "data.masks=true",
        "data.batch_size=8",
        f"augment={preset}",
        *(["+augment.train.ops.vflip={p: 0.5}"] if preset == "small" else []),
    )
    result = GraphCase(f"detection {preset} {split}", devices, overrides, split).check()
    assert result.ok, failed(result)
    assert result.graph is not None
    resizes = [op for op in result.graph.ops if op.schema == "Resize"]
    # On the GPU the images' resize and the masks'; on the CPU the images take the
    # compiled resize, and the masks DALI's.
    assert len(resizes) == (2 if devices.on_gpu else 1)
    assert {op.device for op in resizes} == {"gpu" if devices.on_gpu else "cpu"}
    assert len(result.graph.outputs) == 3  # images, masks, labels


@pytest.mark.parametrize("split", ["train", "val"])
def test_the_segmentation_graph_moves_its_masks_where_the_images_go_without_a_gpu(
    split: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Data with a mask per image (``augment=seg``: a crop padded past the resized image,
    the mask with the ignore index): traced for the GPU, the masks handed over there."""
    root = tmp_path_factory.mktemp("segmentation")
    overrides = (
        "data=sample_segmentation",
        f"data.root={root}",
        "data.train_images=8",
        "data.val_images=8",
        "data.batch_size=8",
        "augment=seg",
    )
    result = GraphCase(f"segmentation {split}", GPU, overrides, split).check()
    assert result.ok, failed(result)
    assert result.graph is not None
    assert {op.device for op in result.graph.ops if op.schema == "Resize"} == {"gpu"}
    assert len(result.graph.outputs) == 3  # images, masks, labels


@pytest.mark.parametrize(
    "devices", [GPU, GraphDevices("cpu", "cpu", "gpu", 0)], ids=["gpu graph", "dali-cpu -> GPU"]
)
def test_colour_ops_before_the_crop_run_on_the_whole_decoded_image_without_a_gpu(
    devices: GraphDevices, sample_objects: Path
) -> None:
    """SSD's distortion before the crop (as torchvision's reference runs it): the whole
    image decoded (no region decoding), distorted, then its window cut, on the GPU."""
    overrides = (
        "data=coco",
        f"data.root={sample_objects}",
        "data.batch_size=8",
        "augment=ssd",
        "augment.train.ops.photometric_distort=null",
        "+augment.train.before.photometric_distort={p: 0.5}",
    )
    result = GraphCase("detection ssd, distortion first", devices, overrides, "train").check()
    assert result.ok, failed(result)
    assert result.graph is not None
    schemas = {op.schema for op in result.graph.ops}
    # the whole image decoded (the preset alone decodes its window's region: ImageSlice)
    assert "decoders__Image" in schemas and "decoders__ImageSlice" not in schemas
