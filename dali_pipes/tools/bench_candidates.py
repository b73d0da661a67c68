"""What ``python -m dali_pipes.bench`` can measure: one list, :data:`CANDIDATES`.

Each candidate has its name (what ``bench.candidates`` lists), one line on what it is,
whether it needs a GPU (skipped without one), whether it runs by default, and how it is
measured, given the run's shared settings (:class:`BenchRun`): the same files, batch size,
augmentation, threads, warm-up and repeats for every one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from dali_pipes.backends import backend_kind, create_loader
from dali_pipes.backends.specs import BackendSpec, DaliBackend, LoaderSpec, TorchBackend
from dali_pipes.config.schemas import BenchSpec, PackSpec
from dali_pipes.config.specs import to_spec
from dali_pipes.data.coco import CocoSource
from dali_pipes.data.interface import Annotated, Source, local_paths_of
from dali_pipes.data.sources import ShardSource, open_shards
from dali_pipes.data.specs import ShardData
from dali_pipes.errors import DataError
from dali_pipes.runtime.devices import local_gpu
from dali_pipes.tools.bench_baseline import baseline, decode_ceiling
from dali_pipes.tools.bench_detection import detection_baseline
from dali_pipes.tools.measurement import Measurement, measure
from dali_pipes.tools.peers.task import PeerTask, PeerUnavailable

log = logging.getLogger("dali_pipes.bench")


@dataclass(frozen=True)
class BenchRun:
    """What every candidate of one ``bench`` run shares."""

    cfg: DictConfig
    bench: BenchSpec
    spec: LoaderSpec  # the train split, one process
    source: Source
    cores: int
    workers: int  # DataLoader workers of the baseline and the torch backend
    cuda: bool

    def timed(self, name: str, epochs: Callable[[], Iterable[Any]]) -> Measurement:
        """Time ``epochs`` as every candidate is timed (warm-up, repeats, images per repeat)."""
        b = self.bench
        return measure(
            name,
            epochs,
            warmup_images=b.warmup_images,
            min_images=b.min_images,
            repeats=b.repeats,
            cores=self.cores,
        )

    def backend(self, name: str, device: str) -> BackendSpec:
        """The configured backend options when they are for backend ``name``, else its
        defaults, on ``device``."""
        kind = backend_kind(name).spec
        base = to_spec(self.cfg.backend, BackendSpec)
        fields = asdict(base) if base.name == name else {}
        return kind(**{**fields, "name": name, "device": device})

    def torch_backend(self, **changes: Any) -> TorchBackend:
        """The torch backend's options for this run, with ``changes``."""
        backend = self.backend("torch", "auto")
        assert isinstance(backend, TorchBackend)
        return replace(backend, **changes)

    def loader(self, name: str, backend: BackendSpec, **changes: Any) -> Measurement:
        """One of dali_pipes' loaders. Each hands batches over where it makes them: a
        trainer.device of the config would move some candidates' batches and not others."""
        start = time.perf_counter()
        candidate = replace(self.spec, backend=backend, output_device=None, **changes)
        with create_loader(candidate) as loader:
            built = time.perf_counter() - start
            result = self.timed(name, lambda: loader)
        if changes.get("cache"):
            result.note = f"decoded once in {built:.1f} s before timing"
        return result

    def pack(self, max_side: bool) -> tuple[str, ShardSource]:
        """Where the bench's data is packed, and its train split: ``bench.shards``, or with
        ``max_side`` that path with ``-max-side-N`` added, stored at most
        ``bench.max_side`` pixels on the long side (each packed first if absent)."""
        where = self.bench.shards
        if not max_side:
            return where, packed(self.cfg, where)
        where = f"{where}-max-side-{self.bench.max_side}"
        return where, packed(self.cfg, where, self.bench.max_side)

    def on_shards(self, name: str, backend: BackendSpec, max_side: bool = False) -> Measurement:
        """A loader over the same data packed into shards (:meth:`pack`)."""
        where, shards = self.pack(max_side)
        result = self.loader(name, backend, source=shards)
        count = len(shards.layout.tars)
        result.note = f"{count} shard{'s' if count != 1 else ''} in {where}"
        return result

    def decode_packed(self, name: str, max_side: bool = False) -> Measurement:
        """The decode ceiling of the packed images (as ``pack`` stored them, :meth:`pack`),
        for the same number of images as the folder's."""
        where, shards = self.pack(max_side)
        count = min(len(shards), self.bench.min_images)
        blobs = [b.tobytes() for b in shards.read(range(count)) if not isinstance(b, DataError)]
        result = decode_ceiling(blobs, self.cores, self.bench.min_images, self.bench.repeats, name)
        result.note += f", the images packed in {where}"
        return result

    def example(self, name: str, device_id: int | None) -> Measurement:
        """DALI's own example pipeline, our threads: its ResNet-50 one
        (:mod:`~dali_pipes.tools.dali_example`), or its SSD one for data with boxes
        (:mod:`~dali_pipes.tools.ssd_example`)."""
        from dali_pipes.tools.dali_example import ExampleLoader
        from dali_pipes.tools.ssd_example import SsdExampleLoader

        options = self.backend("dali", "auto")
        assert isinstance(options, DaliBackend)
        kind = SsdExampleLoader if isinstance(self.source, Annotated) else ExampleLoader
        with kind(self.spec, options, device_id) as loader:
            result = self.timed(name, lambda: loader)
        result.note = loader.note
        return result

    def on_folder(
        self, name: str, measure: Callable[[tuple[str, ...]], Measurement]
    ) -> Measurement:
        """A candidate that reads the files of an image folder itself (``measure(paths)``);
        skipped, in one line in its row, for data that is not local files."""
        paths = local_paths_of(self.source)
        if paths is None:
            return Measurement(name, note="skipped: reads an image folder; the data is not one")
        return measure(paths)

    def host_side(self, name: str) -> Measurement:
        """The GPU path's host side alone (``feed``) or DALI's reader alone (``reader``):
        no decoding, on any machine (:mod:`~dali_pipes.tools.host_side`)."""
        from dali_pipes.tools.host_side import FeedOnly, ReaderOnly, feed_spec

        options = self.backend("dali", "auto")
        assert isinstance(options, DaliBackend)
        loader: Any
        if name == "feed":
            loader = FeedOnly(feed_spec(self.spec, options))
            note = "the GPU graph's feed alone: files read and every column fed, no decoding"
        else:
            loader = ReaderOnly(self.spec, options)
            note = loader.note
        with loader:
            result = self.timed(name, lambda: loader)
        result.note = note
        return result

    def peer(self, name: str, build: Callable[[PeerTask], Any]) -> Measurement:
        """A peer loader (:mod:`~dali_pipes.tools.peers`) built by ``build`` on this run's
        task and DALI thread count; a peer that cannot run here is one line in its row."""
        try:
            with build(peer_task(self, name)) as loader:
                result = self.timed(name, lambda: loader)
        except PeerUnavailable as exc:
            log.warning("%s", exc)
            return Measurement(name, note=f"skipped: {exc}")
        result.note = loader.note
        return result


def peer_task(run: BenchRun, name: str) -> PeerTask:
    """The work every peer does in this run (one line if the configured split is not
    one a peer can realise), on the thread count of dali_pipes' DALI loader."""
    options = run.backend("dali", "auto")
    assert isinstance(options, DaliBackend)
    return PeerTask.from_spec(run.spec, options.num_threads or run.cores, name)


def _ffcv(run: BenchRun) -> Callable[[PeerTask], Any]:
    """FFCV's loader over the split converted to ``.beton`` in ``bench.beton`` (converted
    first, timed apart, when that folder has no conversion of these files)."""

    def build(task: PeerTask) -> Any:
        from dali_pipes.tools.peers.ffcv_loader import FfcvLoader, beton_path, write_beton

        path = beton_path(task, run.bench.beton)
        converted = None if path.exists() else write_beton(task, path)
        loader = FfcvLoader(task, path)
        mb = path.stat().st_size / 2**20
        loader.note += (
            f" ({mb:.0f} MB, converted in {converted:.1f} s before timing)"
            if converted is not None
            else f" ({mb:.0f} MB, converted by an earlier run)"
        )
        return loader

    return build


def _spdl(task: PeerTask) -> Any:
    from dali_pipes.tools.peers.spdl_loader import SpdlLoader

    return SpdlLoader(task)


def _dynamic(device: str) -> Callable[[PeerTask], Any]:
    def build(task: PeerTask) -> Any:
        from dali_pipes.tools.peers.dali_dynamic import DynamicLoader

        return DynamicLoader(task, device)

    return build


@dataclass(frozen=True)
class Candidate:
    """One loader ``bench`` can measure."""

    name: str
    what: str
    measure: Callable[[BenchRun], Measurement]
    gpu: bool = False
    default: bool = False


def packed(cfg: DictConfig, where: str, max_side: int | None = None) -> ShardSource:
    """The train split of the bench's data, packed at ``where`` (packed now if absent, with
    ``pack.max_side`` if given)."""
    from dali_pipes.data.shards import MANIFEST
    from dali_pipes.tools.pack import run_pack

    if not (Path(where) / MANIFEST).exists():
        log.info("packing the data into %s for the *-shards candidates", where)
        pack_cfg = OmegaConf.create({"data": cfg.data, "out": where, "pack": {}})
        pack_cfg.pack = OmegaConf.structured(PackSpec(max_side=max_side))
        run_pack(pack_cfg)
    return open_shards(ShardData(root=where), "train")


def _baseline(run: BenchRun, recipe: bool = False) -> Measurement:
    s = run.spec
    name = "baseline-recipe" if recipe else "baseline"
    if isinstance(run.source, CocoSource) and not recipe:
        return run.timed(
            name, detection_baseline(run.source, s.augment, s.batch_size, run.workers, run.cuda)
        )
    return run.on_folder(
        name,
        lambda _: run.timed(
            name, baseline(run.source, s.augment, s.batch_size, run.workers, run.cuda, recipe)
        ),
    )


CANDIDATES: dict[str, Candidate] = {
    c.name: c
    for c in (
        Candidate(
            "baseline",
            "torchvision ImageFolder + PIL + the same ops as v2 transforms + DataLoader",
            _baseline,
            default=True,
        ),
        Candidate(
            "baseline-recipe",
            "the baseline with Gaussian blur as the self-supervised recipes write it (PIL's)",
            lambda r: _baseline(r, recipe=True),
        ),
        Candidate(
            "torch",
            "the torch backend",
            lambda r: r.loader("torch", r.torch_backend(num_workers=r.workers)),
            default=True,
        ),
        Candidate(
            "dali-cpu",
            "DALI on the CPU",
            lambda r: r.loader("dali-cpu", r.backend("dali", "cpu")),
            default=True,
        ),
        Candidate(
            "dali-gpu",
            "DALI on the GPU",
            lambda r: r.loader("dali-gpu", r.backend("dali", "gpu")),
            gpu=True,
            default=True,
        ),
        Candidate(
            "synthetic",
            "one random batch already in place: the ceiling",
            lambda r: r.loader("synthetic", r.backend("synthetic", "auto")),
            default=True,
        ),
        Candidate(
            "decode",
            "full libjpeg-turbo decodes on every core: the CPU's decode ceiling",
            lambda r: r.on_folder(
                "decode",
                lambda paths: decode_ceiling(paths, r.cores, r.bench.min_images, r.bench.repeats),
            ),
            default=True,
        ),
        Candidate(
            "decode-shards",
            "full libjpeg-turbo decodes of the packed images (bench.shards) on every core",
            lambda r: r.decode_packed("decode-shards"),
        ),
        Candidate(
            "dali-cpu-max-side",
            "DALI on the CPU over the data packed at most bench.max_side px on the long side",
            lambda r: r.on_shards("dali-cpu-max-side", r.backend("dali", "cpu"), max_side=True),
        ),
        Candidate(
            "torch-max-side",
            "the torch backend over the data packed at most bench.max_side px",
            lambda r: r.on_shards(
                "torch-max-side", r.torch_backend(num_workers=r.workers), max_side=True
            ),
        ),
        Candidate(
            "dali-gpu-max-side",
            "DALI on the GPU over the data packed at most bench.max_side px",
            lambda r: r.on_shards("dali-gpu-max-side", r.backend("dali", "gpu"), max_side=True),
            gpu=True,
        ),
        Candidate(
            "decode-max-side",
            "full libjpeg-turbo decodes of the images packed at most bench.max_side px",
            lambda r: r.decode_packed("decode-max-side", max_side=True),
        ),
        Candidate(
            "torch-shards",
            "the torch backend over the data packed (bench.shards)",
            lambda r: r.on_shards("torch-shards", r.torch_backend(num_workers=r.workers)),
        ),
        Candidate(
            "dali-cpu-shards",
            "DALI on the CPU over the data packed",
            lambda r: r.on_shards("dali-cpu-shards", r.backend("dali", "cpu")),
        ),
        Candidate(
            "dali-gpu-shards",
            "DALI on the GPU over the data packed",
            lambda r: r.on_shards("dali-gpu-shards", r.backend("dali", "gpu")),
            gpu=True,
        ),
        Candidate(
            "cache-ram",
            "data.cache=ram: decoded once, augmented by torch",
            lambda r: r.loader("cache-ram", r.torch_backend(), cache="ram"),
        ),
        Candidate(
            "cache-gpu",
            "data.cache=gpu: decoded once onto the GPU, augmented by DALI",
            lambda r: r.loader("cache-gpu", r.torch_backend(device="gpu"), cache="gpu"),
            gpu=True,
        ),
        Candidate(
            "dali-raw",
            "DALI's own ResNet-50 example pipeline on the CPU (its SSD one for data with boxes)",
            lambda r: r.example("dali-raw", None),
        ),
        Candidate(
            "dali-raw-gpu",
            "DALI's own ResNet-50 (or SSD) example pipeline on dali-gpu's GPU",
            lambda r: r.example("dali-raw-gpu", local_gpu().index),
            gpu=True,
        ),
        Candidate(
            "feed",
            "the GPU graph's host side alone: planned files read, every column fed, no decode",
            lambda r: r.host_side("feed"),
        ),
        Candidate(
            "reader",
            "DALI's readers.file alone over the same folder (the feed's yardstick)",
            lambda r: r.host_side("reader"),
        ),
        Candidate(
            "spdl",
            "SPDL (Meta): thread pipeline, FFmpeg decode and filter-graph augmentation",
            lambda r: r.peer("spdl", _spdl),
        ),
        Candidate(
            "dali-dynamic",
            "DALI's dynamic mode (nvidia.dali.experimental.dynamic) on the CPU",
            lambda r: r.peer("dali-dynamic", _dynamic("cpu")),
        ),
        Candidate(
            "dali-dynamic-gpu",
            "DALI's dynamic mode with GPU decoding and operators",
            lambda r: r.peer("dali-dynamic-gpu", _dynamic("gpu")),
            gpu=True,
        ),
        Candidate(
            "ffcv",
            "FFCV: .beton file (converted first, timed apart), numba-compiled CPU ops",
            lambda r: r.peer("ffcv", _ffcv(r)),
        ),
    )
}
#: The loaders users pick instead of dali_pipes (the optional extra ``peers``).
PEER_CANDIDATES = ("spdl", "dali-dynamic", "dali-dynamic-gpu", "ffcv")
DEFAULTS = tuple(name for name, c in CANDIDATES.items() if c.default)
