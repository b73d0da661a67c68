"""One DALI loader's graph, defined for where it runs, apart from the loader that runs it.

The graph of a split: its inputs (encoded files decoded per crop window, or cached images
sliced per crop window; for a split with views, the region holding every view's window),
then per view (:mod:`dali_pipes.backends.dali.views`) the resize, the ops and the fused
normalisation. It is defined here from a :class:`~dali_pipes.backends.specs.LoaderSpec`
and :class:`GraphDevices` alone, so the very graph a loader builds on a GPU can also be
defined and traced on a machine without one (:mod:`dali_pipes.backends.dali.trace`; only
building it needs CUDA), and run as its CPU twin: the GPU's graph with every operator on
the CPU.

Two realisations exist because the fast way differs per device: on the CPU the resize, the
auto-augment slots, colour jitter, grayscale and blur are compiled kernels
(:mod:`dali_pipes.image.resample`, :mod:`dali_pipes.augment.auto.kernel`,
:mod:`dali_pipes.augment.ops.cpu_kernels`) and equalize is torchvision's; on the GPU they
are DALI's own resize and blur, DALI arithmetic picked per sample by conditionals, and
``fn.equalize``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, NoReturn, Protocol

import torch

from dali_pipes.augment.base import Context
from dali_pipes.augment.targets.masks_dali import masks_through_geometry
from dali_pipes.backends.dali.columns import Fed, FedColumns, banded
from dali_pipes.backends.dali.views import ViewGraph, window
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.data.interface import Annotated, mask_fill
from dali_pipes.errors import DaliPipesError

Device = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class GraphDevices:
    """Where a DALI graph runs, and which of its two realisations it is.

    ``realisation``: the graph written for the GPU (nvJPEG, DALI's resize, conditional
    slots, ``fn.equalize``) or for the CPU (libjpeg-turbo and compiled kernels).
    ``operators``: the device its operators run on; the GPU realisation on the CPU is the
    *CPU twin*, which runs the GPU graph's logic where there is no GPU. ``outputs``: where
    batches leave DALI; the CPU graph may hand them to a GPU (DALI copies the uint8 crops
    there for the normalisation: "dali-cpu"). ``device_id``: the pipeline's GPU, None when
    the pipeline touches none.
    """

    realisation: Device
    operators: Device
    outputs: Device
    device_id: int | None

    def __post_init__(self) -> None:
        on_gpu = self.operators == "gpu"
        consistent = (
            (not on_gpu or (self.realisation == "gpu" and self.outputs == "gpu"))
            and (self.outputs == "cpu") == (self.device_id is None)
            and (self.device_id is None or self.device_id >= 0)
        )
        if not consistent:
            raise DaliPipesError(f"inconsistent DALI graph devices: {self}")

    @classmethod
    def for_loader(cls, made: torch.device, device: torch.device) -> GraphDevices:
        """The graph of a loader that makes batches on ``made`` and hands them over on
        ``device`` (:func:`dali_pipes.backends.base.loader_devices`)."""
        if made.type == "cuda":
            return cls.gpu(made.index or 0)
        if device.type == "cuda":
            return cls("cpu", "cpu", "gpu", device.index or 0)
        return cls.cpu()

    @classmethod
    def gpu(cls, device_id: int = 0) -> GraphDevices:
        """The GPU graph on GPU ``device_id``."""
        return cls("gpu", "gpu", "gpu", device_id)

    @classmethod
    def cpu(cls) -> GraphDevices:
        """The CPU graph, batches on the CPU: no GPU at all."""
        return cls("cpu", "cpu", "cpu", None)

    @classmethod
    def twin(cls) -> GraphDevices:
        """The GPU's graph with every operator on the CPU."""
        return cls("gpu", "cpu", "cpu", None)

    @property
    def gpu_graph(self) -> bool:
        """The GPU's realisation (on the GPU, or its CPU twin)."""
        return self.realisation == "gpu"

    @property
    def on_gpu(self) -> bool:
        """The operators run on the GPU."""
        return self.operators == "gpu"

    @property
    def is_twin(self) -> bool:
        """The GPU's realisation with its operators on the CPU."""
        return self.gpu_graph and not self.on_gpu

    @property
    def copies_to_gpu(self) -> bool:
        """Operators on the CPU, batches handed to a GPU (DALI's ``.gpu()`` copy)."""
        return self.operators == "cpu" and self.outputs == "gpu"

    def describe(self) -> str:
        """These devices in words, for messages."""
        if self.on_gpu:
            return f"the GPU graph on GPU {self.device_id}"
        if self.is_twin:
            return "the GPU graph's CPU twin"
        if self.copies_to_gpu:
            return f"the CPU graph handing batches to GPU {self.device_id}"
        return "the CPU graph"


def never_called() -> NoReturn:
    """The ``external_source`` of a graph that is only defined and traced, never run."""
    raise DaliPipesError("this DALI graph was defined to be traced, not run")


class GraphInputs(Protocol):
    """Where a graph's images and fed parameters come from."""

    def nodes(self, graph: DaliGraph, columns: FedColumns) -> tuple[Any, Fed]:
        """(each decode window's uint8 HWC pixels, the fed columns) as DataNodes."""
        ...


def fed_nodes(source: Callable[[], Any], columns: FedColumns) -> Fed:
    """The feed's columns as DataNodes: one ``external_source`` calling ``source`` for a
    batch's flat columns (:meth:`Fed.flat`).

    DALI takes them without a copy (``no_copy``): it keeps a reference to each array until
    it has consumed it, and the feed changes no array it handed over (the buffers of local
    reads are read into again only once DALI delivered their batch: :meth:`Feed.delivered`)."""
    from nvidia.dali import fn

    types = columns.dali_types()
    nodes = fn.external_source(
        source=source, num_outputs=len(types), batch=True, dtype=types, no_copy=True
    )
    return columns.unflatten(nodes)


@dataclass(frozen=True)
class EncodedFiles:
    """Encoded files and their parameters from ``source`` (the file feed); the graph
    decodes each file's decode window (:meth:`Fed.decoded`)."""

    source: Callable[[], Any] = never_called

    def nodes(self, graph: DaliGraph, columns: FedColumns) -> tuple[Any, Fed]:
        """The feed's encoded files, each decoded to its decode window, and the fed columns."""
        fed = fed_nodes(self.source, columns)
        decoded = fed.decoded()
        before = partial(graph.before_crop, fed) if graph.colours_first else None
        return graph.decode(fed.images, decoded.anchor, decoded.shape, before), fed


@dataclass(frozen=True)
class CachedPixels:
    """Decoded whole images from ``pixels``, on the graph's operator device (copied in on
    ``cuda_stream``), and their parameters from ``params``; the graph slices each decode
    window (``data.cache=gpu``)."""

    params: Callable[[], Any] = never_called
    pixels: Callable[[], Any] = never_called
    cuda_stream: Any = None

    def nodes(self, graph: DaliGraph, columns: FedColumns) -> tuple[Any, Fed]:
        """The cached images' decode windows and the fed columns."""
        from nvidia.dali import fn, types

        kinds = columns.dali_types(images=False)
        params = fn.external_source(
            source=self.params, num_outputs=len(kinds), batch=True, dtype=kinds
        )
        images = fn.external_source(
            source=self.pixels,
            batch=True,
            dtype=types.UINT8,
            ndim=3,
            layout="HWC",
            device=graph.devices.operators,
            cuda_stream=self.cuda_stream,
        )
        fed = columns.unflatten(params, images=images)
        decoded = fed.decoded()
        return window(images, decoded.anchor, decoded.shape, graph.pad_fill), fed


@dataclass(frozen=True)
class DaliGraph:
    """The graph of ``spec``'s split on ``devices``.

    ``resize``: the CPU realisation's compiled resize (a :class:`~dali_pipes.image.resample.
    WindowResize`), required to define its whole graph; unused by the GPU realisation and
    by :meth:`define_decoder`.
    """

    spec: LoaderSpec
    devices: GraphDevices
    num_threads: int
    resize: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec.backend, DaliBackend):
            raise DaliPipesError(f"a DALI graph needs DALI options, not {self.spec.backend}")

    @property
    def options(self) -> DaliBackend:
        """The DALI backend's options (``backend.*``)."""
        assert isinstance(self.spec.backend, DaliBackend)
        return self.spec.backend

    @property
    def fancy_upsampling(self) -> bool:
        """libjpeg-style chroma upsampling asked of nvJPEG (the GPU realisation only)."""
        return self.devices.gpu_graph and self.options.fancy_upsampling

    @property
    def pad_fill(self) -> tuple[int, int, int] | None:
        """The padding colour of crop windows that may reach past the image (None: they
        never do; :meth:`~dali_pipes.augment.base.CropOp.pad_fill`)."""
        return self.spec.augment.views(self.spec.train).pad_fill()

    @property
    def banded(self) -> bool:
        """Whether the windows are resized in bands (:func:`.columns.banded`): the decoded
        region is then each band's part inside its image."""
        return banded(self.spec.augment, self.spec.train)

    @property
    def roi_decode(self) -> bool:
        """Decode only the crop window: as asked, else unless nvJPEG is asked for fancy
        upsampling (which it declines together with region decoding). Never for windows
        that may reach past the image (DALI's region decoders cannot pad) unless they are
        resized in bands, whose decoded region lies inside the image."""
        if (self.pad_fill is not None and not self.banded) or self.colours_first:
            return False
        roi = self.options.roi_decode
        return not self.fancy_upsampling if roi is None else roi

    @property
    def colours_first(self) -> bool:
        """Whether colour ops run on the whole decoded image before the crop
        (:attr:`~dali_pipes.augment.pipeline.Pipeline.before`): it is then decoded whole."""
        views = self.spec.augment.views(self.spec.train)
        return any(p.before for p in views.pipelines)

    def before_crop(self, fed: Fed, images: Any) -> Any:
        """The ops before the crop on the whole decoded ``images``, fed their parameters."""
        pipeline = self.spec.augment.views(self.spec.train).pipelines[0]
        devices = self.devices
        return pipeline.dali_before(images, fed.views[0].params, devices.on_gpu, devices.is_twin)

    def define(self, inputs: GraphInputs) -> Any:
        """The pipeline, defined but not built (building allocates; this does not)."""
        from nvidia.dali import pipeline_def

        augment, train = self.spec.augment, self.spec.train
        # Conditionals: ops that choose per sample (a probability, RandAugment's operation
        # in the GPU realisation) from the fed parameters with DALI `if` branches. DALI's
        # AutoGraph then rewrites the graph function and what it calls (so nothing but
        # graph code runs inside it); that costs time at every build, so only when an op
        # needs it.
        conditionals = any(
            p.needs_conditionals(self.devices.gpu_graph) for p in augment.views(train).pipelines
        )
        # The columns are named here, outside the graph function AutoGraph converts.
        columns = FedColumns.of_split(augment, train, masks=self.masks, band=self.banded)
        graph = pipeline_def(
            partial(self._graph, inputs, columns), enable_conditionals=conditionals
        )
        return graph(
            batch_size=self.spec.batch_size,
            num_threads=self.num_threads,
            device_id=self.devices.device_id,
            prefetch_queue_depth=self.options.prefetch_queue_depth,
            seed=self.spec.sampling.seed,
        )

    def define_decoder(self) -> Any:
        """A batch-of-one pipeline of :meth:`decode` alone, defined but not built: what
        decides whether this graph's decoder rejects one file."""
        from nvidia.dali import fn, types
        from nvidia.dali.pipeline import Pipeline

        pipe = Pipeline(
            batch_size=1, num_threads=1, device_id=self.devices.device_id, prefetch_queue_depth=1
        )
        with pipe:
            encoded = fn.external_source(name="encoded", dtype=types.UINT8)
            anchor = fn.external_source(name="anchor", dtype=types.FLOAT)
            shape = fn.external_source(name="shape", dtype=types.FLOAT)
            pipe.set_outputs(self.decode(encoded, anchor, shape))
        return pipe

    def decode(
        self,
        encoded: Any,
        anchor: Any,
        shape: Any,
        before: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Decode each image's crop window, as the graph does and a probe must; ``before``:
        what runs on the whole decoded images before their window is taken (the colour
        ops before the crop).

        One place for the decoding op and all its options (device, ``hw_decoder_load``,
        paddings, fancy upsampling, region decoding or whole-image decoding and a slice).
        The CPU twin passes the GPU's options to the CPU decoder, which accepts them.
        """
        from nvidia.dali import fn, types

        decoder: dict[str, Any] = {}
        if self.devices.gpu_graph:
            options = self.options
            decoder = {
                "hw_decoder_load": options.hw_decoder_load,
                "preallocate_width_hint": options.preallocate_width_hint,
                "preallocate_height_hint": options.preallocate_height_hint,
                "jpeg_fancy_upsampling": options.fancy_upsampling,
            }
            if options.device_memory_padding:
                decoder["device_memory_padding"] = options.device_memory_padding
            if options.host_memory_padding:
                decoder["host_memory_padding"] = options.host_memory_padding
        decoder.update(
            device="mixed" if self.devices.on_gpu else "cpu",
            output_type=types.RGB,
            adjust_orientation=False,  # like ImageFolder/PIL: EXIF orientation ignored
        )
        if self.roi_decode:
            return fn.decoders.image_slice(
                encoded,
                anchor,
                shape,
                normalized_anchor=False,
                normalized_shape=False,
                **decoder,
            )
        whole = fn.decoders.image(encoded, **decoder)
        if before is not None:
            whole = before(whole)
        return window(whole, anchor, shape, self.pad_fill)

    def _resize(
        self, images: Any, roi_start: Any, roi_end: Any, out: Any, interpolation: str = "bilinear"
    ) -> Any:
        """Each crop window to the output size: antialiased linear, DALI's filter (cubic
        for ``bicubic``)."""
        from nvidia.dali import fn, types

        cubic = interpolation == "bicubic"
        if not self.devices.gpu_graph:  # the same filter, compiled (3x DALI's CPU resize)
            from dali_pipes.augment.dali_ops import cpu_kernel

            if self.resize is None:
                raise DaliPipesError(
                    "the CPU realisation of a DALI graph needs its compiled resize"
                )
            # A WindowResize: its cubic method for a bicubic crop.
            function = getattr(self.resize, "cubic", self.resize) if cubic else self.resize
            return cpu_kernel(
                "the compiled resize",
                images,
                roi_start,
                roi_end,
                out,
                function=function,
                batch_processing=True,
                output_layouts="HWC",
            )
        return fn.resize(
            images,
            size=out,  # fed: a resolution schedule changes it without a rebuild
            roi_start=roi_start,
            roi_end=roi_end,
            roi_relative=False,
            antialias=True,
            interp_type=types.INTERP_CUBIC if cubic else types.INTERP_LINEAR,
        )

    @property
    def masks(self) -> bool:
        """Whether the data has instance masks, which the graph moves with the images."""
        source = self.spec.source
        return isinstance(source, Annotated) and source.has_masks

    def _masks(self, fed: Fed) -> Any:
        """The instance masks through the crop's window (their own columns), nearest-neighbour
        resize and ops (:mod:`dali_pipes.augment.targets.masks_dali`), where the images go."""
        from nvidia.dali import fn

        m = fed.masks
        assert m is not None
        devices, view = self.devices, fed.views[0]
        pipeline = self.spec.augment.views(self.spec.train).pipelines[0]
        masks = fn.reshape(m.masks, layout="HWC")
        if devices.on_gpu:
            masks = masks.gpu()
        fill = mask_fill(self.spec.source) if isinstance(self.spec.source, Annotated) else 0
        masks = masks_through_geometry(
            masks, m.anchor, m.shape, m.roi_start, m.roi_end, m.out, m.size, fill
        )
        ctx = Context(size=pipeline.size(), gpu=devices.on_gpu, twin=devices.is_twin)
        masks = pipeline.targets.masks_dali(masks, view.params, ctx)
        return masks.gpu() if devices.copies_to_gpu else masks

    def _graph(self, inputs: GraphInputs, columns: FedColumns) -> tuple[Any, ...]:
        """inputs (the decode windows) -> each view's window (views only), resize, ops and
        normalisation (:mod:`~dali_pipes.backends.dali.views`); outputs: the views, then
        the labels."""
        devices = self.devices
        images, fed = inputs.nodes(self, columns)
        views = ViewGraph(self.spec.augment, self.spec.train, devices, self._resize, self.pad_fill)
        outputs = views.outputs(images, fed)
        if fed.masks is not None:  # data with instance masks: after the images
            outputs.append(self._masks(fed))
        # Appended, not unpacked into a tuple: DALI's AutoGraph converts this code.
        labels = fed.labels
        outputs.append(labels.gpu() if devices.outputs == "gpu" else labels)
        return tuple(outputs)
