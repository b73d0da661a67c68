"""The private (or undocumented) APIs of other libraries that dali_pipes uses, in one list.

Wherever a library has a public way, dali_pipes takes it (torch's ``default_collate``,
Hydra's ``get_object``, OmegaConf's ``items_ex``/``get_type``, torch's public norm layer
classes). What is left is listed here, each with what it is, where it is used and why no
public API does the job, and a probe: a small call on a tiny input that fails when an
upgrade removes or changes it. tests/unit/test_private_apis.py runs every probe, so an
upgrade that breaks one fails in one line naming the API, not deep in a loader.

Nothing in the package imports this module: it is the list the test and a reader use.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class PrivateApi:
    """One private API: its ``name``, ``what`` it is, the modules that use it (``used_in``;
    each has every string of ``spelled`` in its source), ``why`` no public API replaces it,
    the ``probe`` that uses it on a tiny input (raises when it is gone or changed), and
    the package it ``needs`` (its probe is not run where that is not installed)."""

    name: str
    what: str
    used_in: tuple[str, ...]
    spelled: tuple[str, ...]
    why: str
    probe: Callable[[], None]
    needs: str

    def gone(self) -> str | None:
        """None when the probe passes; else one line naming the API, its users and why."""
        try:
            self.probe()
        except Exception as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            return (
                f"private API {self.name} is gone or changed ({type(exc).__name__}: "
                f"{reason}); used in {', '.join(self.used_in)}"
            )
        return None

    @property
    def available(self) -> bool:
        """Whether the package it needs is installed (else its probe is not run)."""
        return importlib.util.find_spec(self.needs) is not None


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(what)


# --------------------------------------------------------------------------- DALI


def _from_dlpack_list() -> None:
    import numpy as np
    from nvidia.dali.tensors import TensorListCPU

    made = TensorListCPU.from_dlpack_list(  # type: ignore[attr-defined]
        [np.arange(3, dtype=np.uint8), np.arange(5, dtype=np.uint8)]
    )
    _check([tuple(s) for s in made.shape()] == [(3,), (5,)], f"shapes {made.shape()}")
    _check(np.array(made[1]).tolist() == [0, 1, 2, 3, 4], "the values were not shared")


@cache
def _traced() -> Any:
    """A tiny CPU pipeline, defined and its graph built as the graph checks build it."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe() -> Any:
        return fn.cast(fn.external_source(name="x"), dtype=types.FLOAT)

    made = pipe()
    made._build_graph()
    return made


def _build_graph() -> None:
    _traced()


def _pipeline_ops() -> None:
    names = [op.name for op in _traced()._ops]
    _check(len(names) == 2, f"operators {names}")


def _op_spec() -> None:
    spec = _traced()._ops[-1]._spec  # the cast, fed by the external source
    regular = spec.NumRegularInput()
    _check(regular == 1 and spec.NumInput() >= regular, "the cast's inputs")
    _check(spec.InputDevice(0) == "cpu", f"input device {spec.InputDevice(0)}")


def _op_schema_device() -> None:
    op = _traced()._ops[-1]._op
    _check(op.schema.Name() == "Cast" and op.device == "cpu", f"{op.schema.Name()} {op.device}")


def _graph_outputs() -> None:
    devices = [node.device for node in _traced()._graph_outputs]
    _check(devices == ["cpu"], f"outputs {devices}")


def _dali_trace() -> None:
    from nvidia.dali._utils import dali_trace

    before = dali_trace.is_tracing_enabled()
    dali_trace.set_tracing(enabled=not before)
    try:
        _check(dali_trace.is_tracing_enabled() == (not before), "the switch did not switch")
    finally:
        dali_trace.set_tracing(enabled=before)


def _registered_ops() -> None:
    from nvidia.dali import backend

    for listing in ("RegisteredCPUOps", "RegisteredGPUOps", "RegisteredMixedOps"):
        _check(len(getattr(backend, listing)(True)) > 0, f"{listing} lists nothing")
    _check("Cast" in backend.RegisteredCPUOps(True), "Cast is not a CPU operator")  # type: ignore[attr-defined]


def _cuda_device_count() -> None:
    from nvidia.dali import backend

    _check(int(backend.GetCUDADeviceCount()) >= 0, "a device count")  # type: ignore[attr-defined]


def _cuda_version() -> None:
    from nvidia.dali import backend

    int(backend.GetCudaVersion())  # type: ignore[attr-defined]


def _numba_hooks() -> None:
    from nvidia.dali.plugin.numba import NumbaFunction

    for hook in ("_get_run_fn_cpu", "_get_setup_fn_cpu"):
        _check(callable(getattr(NumbaFunction, hook, None)), f"NumbaFunction.{hook}")


def _definition_frame_end() -> None:
    from nvidia.dali import ops, types
    from nvidia.dali._utils import dali_trace

    _check(dali_trace.is_tracing_enabled(), "DALI records no definition stacks")
    made = ops.Cast(dtype=types.FLOAT)
    _check(hasattr(made, "_definition_frame_end"), "an operator has no _definition_frame_end")


# --------------------------------------------------------------------------- torch, torchvision


def _autoaugment_policies() -> None:
    from torchvision.transforms.v2 import AutoAugment, AutoAugmentPolicy

    policies = AutoAugment(AutoAugmentPolicy.IMAGENET)._policies
    _check(len(policies) == 25, f"{len(policies)} ImageNet sub-policies")
    (name, p, magnitude), _ = policies[0]
    _check(isinstance(name, str) and 0 <= p <= 1, f"a step {(name, p, magnitude)}")


def _orig_mod() -> None:
    import torch
    from torch import nn

    inner = nn.Identity()
    wrapped = torch.compile(inner)
    _check(getattr(wrapped, "_orig_mod", None) is inner, "torch.compile(m)._orig_mod is not m")


# --------------------------------------------------------------------------- the list

_GRAPH_CHECKS = ("dali_pipes.backends.dali.trace",)
_NO_TRACE_API = (
    "DALI documents no API that lists a defined pipeline's operators with their devices and "
    "inputs; the GPU graph checks need them to check a GPU graph on a machine without a GPU"
)

#: Every private API the package uses, with its probe.
PRIVATE_APIS: tuple[PrivateApi, ...] = (
    PrivateApi(
        name="nvidia.dali.tensors.TensorListCPU.from_dlpack_list",
        what="one DALI batch made from a list of arrays, sharing their memory",
        used_in=("dali_pipes.backends.dali.feed",),
        spelled=("from_dlpack_list",),
        why="undocumented; the public TensorListCPU(list) copies, and external_source given a "
        "list looks at each array in Python on the feeding thread (the hot path)",
        probe=_from_dlpack_list,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali.Pipeline._build_graph",
        what="traces a defined pipeline's graph without building it (no CUDA needed)",
        used_in=_GRAPH_CHECKS,
        spelled=("._build_graph()",),
        why="Pipeline.build() needs the devices the graph runs on; " + _NO_TRACE_API,
        probe=_build_graph,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali.Pipeline._ops",
        what="the traced pipeline's operators, in order",
        used_in=_GRAPH_CHECKS,
        spelled=("._ops",),
        why=_NO_TRACE_API,
        probe=_pipeline_ops,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali operator ._spec (NumRegularInput, NumInput, InputDevice, InputName)",
        what="a traced operator's inputs and named-argument inputs with their devices",
        used_in=_GRAPH_CHECKS,
        spelled=("._spec", "NumRegularInput", "InputDevice", "InputName"),
        why=_NO_TRACE_API,
        probe=_op_spec,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali operator ._op (.schema.Name(), .device)",
        what="a traced operator's schema name and the device it runs on",
        used_in=_GRAPH_CHECKS,
        spelled=("._op.schema.Name()", "._op.device"),
        why=_NO_TRACE_API,
        probe=_op_schema_device,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali.Pipeline._graph_outputs",
        what="the traced pipeline's outputs with their devices",
        used_in=_GRAPH_CHECKS,
        spelled=("._graph_outputs",),
        why=_NO_TRACE_API,
        probe=_graph_outputs,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali._utils.dali_trace (is_tracing_enabled, set_tracing)",
        what="DALI's switch for recording each operator's defining stack",
        used_in=("dali_pipes.backends.dali.trace",),
        spelled=("from nvidia.dali._utils import dali_trace", "set_tracing"),
        why="no public switch; recording is most of a checked graph's CPU time, and a graph "
        "that is only checked is never run",
        probe=_dali_trace,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali.backend.RegisteredCPUOps / RegisteredGPUOps / RegisteredMixedOps",
        what="DALI's operator registry per device, internal operators included",
        used_in=("dali_pipes.backends.dali.trace",),
        spelled=("RegisteredCPUOps", "RegisteredGPUOps", "RegisteredMixedOps"),
        why="undocumented bindings; nothing public says which devices an operator runs on "
        "(DALI accepts a wrong one while tracing and fails only when building)",
        probe=_registered_ops,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali.backend.GetCUDADeviceCount",
        what="the GPUs DALI sees",
        used_in=("dali_pipes.backends.dali.loader", "dali_pipes.selfcheck.checks"),
        spelled=("GetCUDADeviceCount()",),
        why="an undocumented binding; torch's view of CUDA can differ from DALI's (a DALI "
        "build for another CUDA), which is the very thing checked",
        probe=_cuda_device_count,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali.backend.GetCudaVersion",
        what="the CUDA version the driver supports, as DALI sees it",
        used_in=("dali_pipes.selfcheck.environment",),
        spelled=("GetCudaVersion()",),
        why="an undocumented binding; the self-check reports it next to the CUDA DALI was "
        "built with, the pair that explains a DALI that sees no GPU",
        probe=_cuda_version,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali.plugin.numba.NumbaFunction._get_run_fn_cpu / _get_setup_fn_cpu",
        what="the hooks that compile the numba operator's callbacks, overridden to hand DALI "
        "callbacks compiled once per process",
        used_in=("dali_pipes.augment.auto.numba_callbacks",),
        spelled=("def _get_run_fn_cpu", "def _get_setup_fn_cpu"),
        why="NumbaFunction's public constructor compiles both callbacks with numba.cfunc and "
        "no cache each time an operator is made: seconds of CPU per process",
        probe=_numba_hooks,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="nvidia.dali operator ._definition_frame_end",
        what="where an operator's defining stack ends: set while stacks are recorded, read "
        "when the operator is called",
        used_in=("dali_pipes.augment.auto.numba_callbacks",),
        spelled=('"_definition_frame_end"',),
        why="an operator made while recording is off (a checked graph) lacks it; it is set to "
        "DALI's own default so the operator can be called once recording is back on",
        probe=_definition_frame_end,
        needs="nvidia.dali",
    ),
    PrivateApi(
        name="torchvision.transforms.v2.AutoAugment._policies",
        what="torchvision's AutoAugment sub-policies: ((op, probability, magnitude bin), ...)",
        used_in=("dali_pipes.augment.ops.autoaugment",),
        spelled=("._policies",),
        why="torchvision exposes the policies only inside the transform; reading them keeps "
        "ours torchvision's own table rather than a copy",
        probe=_autoaugment_policies,
        needs="torchvision",
    ),
    PrivateApi(
        name="torch.compile(model)._orig_mod",
        what="the module torch.compile wraps",
        used_in=("dali_pipes.train.ema",),
        spelled=('"_orig_mod"',),
        why="torch has no public accessor for it; checkpoints are saved without the "
        "wrapper's _orig_mod. prefix so they load compiled or not",
        probe=_orig_mod,
        needs="torch",
    ),
)
