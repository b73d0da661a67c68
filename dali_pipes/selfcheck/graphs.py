"""Every DALI graph dali_pipes can build for a GPU, defined and traced without one.

:func:`gpu_graphs` lists them over a folder of images (and, when given, its packed
shards): each augmentation preset in ``conf/augment`` (train and val) as the GPU graph,
as the CPU graph that hands its batches to a GPU (dali-cpu), and on ``data.cache=gpu``'s
decoded images; the backend options that change the graph (``roi_decode``,
``fancy_upsampling``, ``hw_decoder_load`` zero and not) with the decoder alone that a
search for a bad file builds; every registered op alone (a user's included, once its
module is imported); ``data=shards``; and ``bench``'s yardstick, DALI's own ResNet-50
example pipeline, on the GPU and the CPU. :func:`check_graphs` traces each one
(:func:`dali_pipes.backends.dali.trace.check`).

A resolution schedule (``augment=ffcv``) is in the graph as a fed output size, so its
graph is the same at every epoch: the preset's case covers it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import Any, Literal

from dali_pipes.augment.base import OPS, op_names
from dali_pipes.backends.dali.graph import (
    CachedPixels,
    DaliGraph,
    EncodedFiles,
    GraphDevices,
    never_called,
)
from dali_pipes.backends.dali.trace import GraphCheck, check
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.config.compose import compose_config, config_dir
from dali_pipes.config.specs import loader_spec


@lru_cache(maxsize=128)
def _composed(overrides: tuple[str, ...], split: str) -> LoaderSpec:
    """The DALI loader spec ``overrides`` compose, for ``split``: composed once per process
    (a Hydra composition costs more than defining the graph), as the cases of one preset
    and split (its GPU graph, dali-cpu's, the GPU cache's) share it. A spec is frozen."""
    return loader_spec(compose_config([*overrides, "backend=dali"]), split)


Kind = Literal["loader", "cached", "decoder", "peer"]


@dataclass(frozen=True)
class GraphCase:
    """One graph to check: the DALI loader's (``kind="loader"``), ``data.cache=gpu``'s
    over decoded images (``cached``), the decoder alone as a search for a bad file builds
    it (``decoder``), or DALI's example pipeline (``peer``), for the config that
    ``overrides`` compose (its ``split``; ``alone``: the training ops replaced by that op
    alone), on ``devices``. Listing cases composes nothing; :meth:`define` does."""

    label: str
    devices: GraphDevices
    overrides: tuple[str, ...]
    split: str = "train"
    kind: Kind = "loader"
    alone: str | None = None

    def spec(self) -> LoaderSpec:
        """The loader spec, composed as a user's config would be, for a GPU that need not
        exist: the placement is given to the graph, not resolved from this machine."""
        spec = _composed(self.overrides, self.split)
        if self.alone is not None:
            ops = {self.alone: dict(OPS[self.alone].graph_params)}
            train = replace(spec.augment.train, ops=ops)
            spec = replace(spec, augment=replace(spec.augment, train=train))
        return spec

    def define(self) -> Any:
        """The pipeline, defined (not built)."""
        spec = self.spec()
        if self.kind == "peer":
            from dali_pipes.tools.dali_example import define_example_pipeline

            assert isinstance(spec.backend, DaliBackend)
            return define_example_pipeline(spec, spec.backend, self.devices.device_id)
        # The CPU graph's compiled resize is a python_function's callable: never run here.
        graph = DaliGraph(spec, self.devices, num_threads=1, resize=never_called)
        if self.kind == "decoder":
            return graph.define_decoder()
        return graph.define(CachedPixels() if self.kind == "cached" else EncodedFiles())

    def check(self) -> GraphCheck:
        """This graph defined, traced and checked (:func:`dali_pipes.backends.dali.trace.check`)."""
        return check(self.label, self.devices, self.define, decodes=self.kind != "cached")


def presets() -> list[str]:
    """The augmentation presets shipped in ``conf/augment``."""
    return sorted(path.stem for path in (config_dir() / "augment").glob("*.yaml"))


def gpu_graphs(photos: Path, shards: Path | None = None, device_id: int = 0) -> list[GraphCase]:
    """Every GPU graph over ``photos`` (an image folder) and ``shards`` (the same packed
    by ``python -m dali_pipes.pack``), for GPU ``device_id``."""
    gpu = GraphDevices.gpu(device_id)
    handover = GraphDevices("cpu", "cpu", "gpu", device_id)
    folder = ("data=folder", f"data.root={photos}", "data.batch_size=8")
    cases: list[GraphCase] = []
    for preset, split in product(presets(), ("train", "val")):
        config = (*folder, f"augment={preset}")
        name = f"augment={preset} {split}"
        cases.append(GraphCase(name, gpu, config, split))
        cases.append(GraphCase(f"{name}, dali-cpu -> GPU", handover, config, split))
        cases.append(GraphCase(f"{name}, data.cache=gpu", gpu, config, split, "cached"))
    for roi, fancy, load in product(("null", "true", "false"), ("false", "true"), (0.0, 0.65)):
        options = (
            f"backend.roi_decode={roi}",
            f"backend.fancy_upsampling={fancy}",
            f"backend.hw_decoder_load={load}",
        )
        name = " ".join(options)
        cases.append(GraphCase(name, gpu, (*folder, *options)))
        cases.append(GraphCase(f"{name}, decoder alone", gpu, (*folder, *options), kind="decoder"))
    for op in op_names(crop=False):
        cases.append(GraphCase(f"op {op} alone", gpu, folder, alone=op))
    if shards is not None:
        packed = ("data=shards", f"data.root={shards}", "data.batch_size=8")
        for split in ("train", "val"):
            cases.append(GraphCase(f"data=shards {split}", gpu, packed, split))
    cases.append(GraphCase("dali-raw-gpu (DALI's example pipeline)", gpu, folder, kind="peer"))
    cpu = GraphDevices.cpu()
    cases.append(GraphCase("dali-raw (DALI's example pipeline, CPU)", cpu, folder, kind="peer"))
    return cases


def check_graphs(cases: Iterable[GraphCase]) -> list[GraphCheck]:
    """Each case defined, traced and checked."""
    return [case.check() for case in cases]
