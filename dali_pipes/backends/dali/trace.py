"""Check a DALI graph without building it: defined and traced, it needs no GPU.

DALI validates a graph while it is defined and traced -- an unknown argument, a GPU node
given as a named argument, an input on a device its operator cannot read -- and only
building it needs CUDA. So the GPU graphs of dali_pipes are checked here on any machine
(``make test`` has no GPU): :func:`check` defines a graph, traces it, and holds what DALI
does not check at that point against DALI's operator registry and the graph's
:class:`~dali_pipes.backends.dali.graph.GraphDevices`:

- every operator has an implementation on its device (DALI accepts, say, a decoder on
  ``gpu`` while tracing and fails only when building);
- Python and numba kernels (``python_function``, ``numba_function``) run on the CPU: ours
  read host memory, and DALI would hand them device memory on the GPU;
- named-argument inputs are on the CPU, ``mixed`` operators are fed from the CPU;
- the pipeline's device id, where decoding runs and where its outputs leave are those
  the devices promise.

Tracing reads DALI's graph through ``Pipeline._build_graph`` and its operator instances,
which DALI does not document: the tests pin what is read here.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from dali_pipes.backends.dali.graph import GraphDevices

#: DALI's schemas (and Python classes) of operators that run Python or numba code.
HOST_KERNELS = frozenset(
    {
        "DLTensorPythonFunctionImpl",
        "NumbaFuncImpl",
        "PythonFunction",
        "TorchPythonFunction",
        "DLTensorPythonFunction",
        "NumbaFunction",
    }
)
_DECODERS = ("decoders__", "ImageDecoder")


@dataclass(frozen=True)
class TracedOp:
    """One operator of a traced graph: DALI's schema name, its device, the devices of its
    positional inputs and of its argument (named) inputs."""

    name: str
    schema: str
    kind: str  # the Python class DALI made it with (PythonFunction for its impl schema)
    device: str  # cpu | gpu | mixed
    inputs: tuple[str, ...]
    arguments: tuple[tuple[str, str], ...]  # (input tensor, device)

    @property
    def host_kernel(self) -> bool:
        """A Python or numba function (code of ours or a user's, reading host memory)."""
        return self.schema in HOST_KERNELS or self.kind in HOST_KERNELS

    @property
    def decoder(self) -> bool:
        """One of DALI's image decoders."""
        return self.schema.startswith(_DECODERS)


@dataclass(frozen=True)
class TracedGraph:
    """A traced pipeline: its operators and the devices of its outputs."""

    device_id: int | None
    ops: tuple[TracedOp, ...]
    outputs: tuple[str, ...]

    def devices(self) -> dict[str, int]:
        """How many operators run on each device."""
        counts: dict[str, int] = {}
        for op in self.ops:
            counts[op.device] = counts.get(op.device, 0) + 1
        return counts


@dataclass(frozen=True)
class GraphCheck:
    """What checking one graph found: ``problems`` (one line each) is empty when the
    graph is sound; ``graph`` is None when DALI refused to define or trace it."""

    label: str
    devices: GraphDevices
    graph: TracedGraph | None
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """No problem was found."""
        return not self.problems


def trace(pipe: Any) -> TracedGraph:
    """``pipe`` (defined, not built) traced: every operator and output with its device."""
    pipe._build_graph()
    ops = []
    for op in pipe._ops:
        spec = op._spec
        regular = spec.NumRegularInput()
        ops.append(
            TracedOp(
                name=op.name,
                schema=op._op.schema.Name(),
                kind=type(op._op).__name__,
                device=op._op.device,
                inputs=tuple(spec.InputDevice(i) for i in range(regular)),
                arguments=tuple(
                    (spec.InputName(i), spec.InputDevice(i))
                    for i in range(regular, spec.NumInput())
                ),
            )
        )
    return TracedGraph(
        device_id=pipe.device_id,
        ops=tuple(ops),
        outputs=tuple(node.device for node in pipe._graph_outputs),
    )


@cache
def _registry(device: str) -> frozenset[str]:
    """DALI's operators with an implementation on ``device``, internal ones included."""
    from nvidia.dali import backend

    listing = {
        "cpu": backend.RegisteredCPUOps,  # type: ignore[attr-defined]
        "gpu": backend.RegisteredGPUOps,  # type: ignore[attr-defined]
        "mixed": backend.RegisteredMixedOps,  # type: ignore[attr-defined]
    }[device]
    return frozenset(listing(True))


def problems(graph: TracedGraph, devices: GraphDevices, *, decodes: bool) -> list[str]:
    """What is wrong with ``graph`` for ``devices`` (``decodes``: it decodes files, rather
    than taking decoded images), one line each; empty when nothing is."""
    found = [problem for op in graph.ops for problem in _op_problems(op)]
    if graph.device_id != devices.device_id:
        found.append(f"the pipeline's device_id is {graph.device_id}, not {devices.device_id}")
    outputs = [device for device in graph.outputs if device != devices.outputs]
    if outputs:
        found.append(
            f"outputs on {graph.outputs}, where {devices.describe()} promises all on "
            f"{devices.outputs}"
        )
    decoders = {op.device for op in graph.ops if op.decoder}
    wanted = {"mixed"} if devices.on_gpu else {"cpu"}
    if decodes and decoders != wanted:
        found.append(f"decoding on {sorted(decoders) or 'nothing'}, not {sorted(wanted)}")
    if not decodes and decoders:
        found.append(f"a decoder in a graph of decoded images ({sorted(decoders)})")
    if not devices.on_gpu and not devices.copies_to_gpu:
        stray = sorted({op.schema for op in graph.ops if op.device != "cpu"})
        if stray:
            found.append(f"{devices.describe()} places operators off the CPU: {stray}")
    return found


def _op_problems(op: TracedOp) -> list[str]:
    found = []
    where = f"{op.schema} ({op.name}) on {op.device}"
    if op.host_kernel:
        if op.device != "cpu":
            found.append(f"{where}: a Python/numba kernel placed on the GPU")
    elif op.schema not in _registry(op.device):
        found.append(f"{where}: DALI has no {op.device} implementation of it")
    for name, device in op.arguments:
        if device != "cpu":
            found.append(f"{where}: argument input {name} is on {device}; named inputs are CPU")
    if op.device == "mixed" and any(device != "cpu" for device in op.inputs):
        found.append(f"{where}: fed from {op.inputs}; a mixed operator reads CPU inputs")
    return found


@contextmanager
def origins_not_recorded() -> Iterator[None]:
    """DALI records, for every operator defined, the Python stack that defined it, to name
    that line should the operator fail while running. A graph checked here is never run,
    and recording the stacks is a quarter of its CPU time (traceback extraction with
    source lines, per operator), so it is off while one is defined and traced, then back
    as it was. DALI's switch is private (``nvidia.dali._utils.dali_trace``): the tests pin
    it. Not thread-safe: the switch is DALI's one global."""
    from nvidia.dali._utils import dali_trace

    before = dali_trace.is_tracing_enabled()
    dali_trace.set_tracing(enabled=False)
    try:
        yield
    finally:
        dali_trace.set_tracing(enabled=before)


def check(
    label: str, devices: GraphDevices, define: Callable[[], Any], *, decodes: bool = True
) -> GraphCheck:
    """Define a pipeline with ``define()`` (not built), trace it and check it against
    ``devices``; DALI refusing to define or trace it is a problem too, in one line."""
    try:
        with origins_not_recorded():
            graph = trace(define())
    except Exception as exc:  # any refusal is the finding
        return GraphCheck(label, devices, None, (refusal(exc),))
    return GraphCheck(label, devices, graph, tuple(problems(graph, devices, decodes=decodes)))


#: Functions that refuse a graph on behalf of their caller (the place to name).
_GUARDS = frozenset({"require_cpu", "cpu_kernel"})
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)')


def refusal(exc: BaseException) -> str:
    """DALI's refusal of a graph in one line: the error and the last place in code outside
    DALI that led to it. DALI's AutoGraph (conditionals) wraps the error in "in user
    code:" and lists the frames of the graph code in its message; otherwise they are the
    traceback's."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and lines[0] == "in user code:":
        message = lines[-1]
        frames = [(f, int(n), fn) for f, n, fn in _FRAME.findall(str(exc))]
    else:
        message = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
        frames = [
            (f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)
        ]
    ours = [
        frame
        for frame in frames
        if f"{os.sep}nvidia{os.sep}dali{os.sep}" not in frame[0] and frame[2] not in _GUARDS
    ]
    if ours:
        path, line, function = ours[-1]
        message += f" (at {Path(path).name}:{line} in {function})"
    return message
