"""What an augmentation op is, the registry of ops by name, and turning config into ops.

An op is a frozen dataclass whose fields are its parameters (the config schema: YAML keys
equal the field names). It owns, in one module:

- ``__post_init__``: coerce and validate the parameters (one-line errors naming the key);
- :meth:`Op.draws` and :meth:`Op.sample`: its random parameters for a whole batch, as
  NumPy arrays computed from uniform draws that the pipeline takes from the counter-based
  hash of (seed, epoch, sample) -- never from a backend's RNG, so every backend receives
  the same numbers and a resumed epoch replays exactly;
- :meth:`Op.torch`: its torch realisation, torchvision's ``transforms.v2.functional``;
- :meth:`Op.dali`: its DALI realisation, fed the same parameters through
  ``external_source`` (per-sample choices use DALI conditionals);
- :meth:`Op.torchvision`: the torchvision v2 transform a user would write for it (the
  ``bench`` baseline);
- for detection and segmentation, how it moves a sample's boxes (:meth:`Op.move_boxes`,
  on the drawn parameters, in NumPy) and masks (:meth:`Op.move_mask_torch`,
  :meth:`Op.move_masks_dali`): an op that keeps every pixel in place leaves them alone.

``@register_op`` puts a class into the registry under its ``name``; a user registers
their own op the same way, from their own module, and names it in the config.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

import numpy as np

from dali_pipes.augment.unconverted import unconverted
from dali_pipes.errors import ConfigError, require
from dali_pipes.registry import Registry

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from dali_pipes.augment.geometry import Geometry
    from dali_pipes.augment.targets.boxes import Boxes

#: One op's parameters for a batch: name -> array with the batch as its first axis.
Params = dict[str, np.ndarray]
#: One sample's row of :data:`Params` (what :meth:`Op.torch` receives).
Row = Mapping[str, Any]

OpClass = TypeVar("OpClass", bound="type[Op]")
T = TypeVar("T")


@dataclass(frozen=True)
class Context:
    """What an op may know besides its parameters.

    ``size``: (height, width) of every image the op sees -- the crop's output, the same for
    the whole batch (a resolution schedule changes it between epochs, so a DALI graph,
    built once, must not make constants of it). ``gpu``: the DALI graph's operators run on
    the GPU (its fed parameters arrive on the CPU and must be moved before they meet GPU
    images in arithmetic). ``twin``: the GPU's graph with every operator on the CPU (see
    :class:`~dali_pipes.backends.dali.graph.GraphDevices`), so that its logic runs where
    there is no GPU. An op with a realisation of its own for the GPU picks it by
    :attr:`gpu_graph`, and places nodes by ``gpu`` (:meth:`operand`, :meth:`constant`).
    ``sizes``: each sample's (height, width), ``[B, 2]``, when a crop gives images sizes of
    their own (``size`` is then the largest; only ops that are not :attr:`Op.sized` follow
    such a crop); None: every image is ``size``.
    """

    size: tuple[int, int]
    gpu: bool = False
    twin: bool = False
    sizes: np.ndarray | None = None

    def shapes(self, count: int) -> np.ndarray:
        """Each of ``count`` samples' (height, width), ``[count, 2]`` int64."""
        if self.sizes is not None:
            return self.sizes
        return np.tile(np.asarray(self.size, dtype=np.int64), (count, 1))

    @property
    def gpu_graph(self) -> bool:
        """The GPU's realisation: on the GPU, or its CPU twin."""
        return self.gpu or self.twin

    @unconverted
    def operand(self, node: Any) -> Any:
        """A fed parameter as an arithmetic operand next to the images."""
        return node.gpu() if self.gpu else node

    @unconverted
    def constant(self, array: np.ndarray) -> Any:
        """A constant tensor on the images' device."""
        from nvidia.dali import types

        return types.Constant(array, device="gpu" if self.gpu else "cpu")


class Op(ABC):
    """An augmentation applied to each sample after the decode-fused crop.

    Subclasses are frozen dataclasses whose fields are the op's parameters (the config's
    keys); see the module docstring for what each method owns. A subclass implements:

    Args:
        (fields): the op's parameters, validated in ``__post_init__``.

    Returns:
        From :meth:`sample`, the batch's parameters (NumPy arrays, batch first); from
        :meth:`torch`, one transformed image; from :meth:`dali`, the transformed DataNode.
    """

    #: The name the config uses.
    name: ClassVar[str]
    #: True when the op changes each pixel from its own value and image-wide statistics
    #: only, so it commutes with a horizontal flip exactly (a flip may move past it).
    pointwise: ClassVar[bool] = False
    #: True when the op's parameters are drawn for the batch's one image size
    #: (``Context.size``: translations in pixels), so it cannot follow a crop that gives
    #: images sizes of their own (:meth:`CropOp.varies_in_size`).
    sized: ClassVar[bool] = False
    #: Settings the gallery (``python -m dali_pipes.show show.gallery=true``) draws the op
    #: at, mildest first: parameters over the defaults (a ``p`` field is set to 1 there, so
    #: the effect shows). Empty: the defaults alone.
    previews: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    #: True when the op's ``p`` field applies the whole op with that probability, so
    #: torchvision's ``RandomApply([op], p=q)`` is this op with ``p * q``.
    p_gates_all: ClassVar[bool] = False
    #: Parameters over the defaults under which the op's DALI graph has every node it can
    #: have (defaults that build no graph, or a ``p`` of 1 that skips a branch, do not):
    #: what the GPU-graph checks (:mod:`dali_pipes.selfcheck.graphs`) build it with.
    graph_params: ClassVar[Mapping[str, Any]] = {}

    def draws(self) -> int:
        """How many uniform draws per sample :meth:`sample` needs."""
        return 0

    @abstractmethod
    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        """The batch's parameters from ``u``, ``[B, draws()]`` uniforms in [0, 1): a pure
        function of ``u``, ``ctx`` and the op's fields (the DALI feed calls it on several
        read threads at once)."""

    @abstractmethod
    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        """One uint8 ``[3, H, W]`` image with this sample's parameters ``p``."""

    @abstractmethod
    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        """The DALI graph on ``images``, parameters as DataNodes.

        ``images`` are float32 HWC holding whole numbers in [0, 255] (the uint8 values
        torchvision works on; see :mod:`dali_pipes.augment.dali_ops`); return the same."""

    def needs_conditionals(self, gpu: bool) -> bool:
        """Whether :meth:`dali` branches per sample on a fed value (a Python ``if`` on a
        DataNode, which DALI runs with ``enable_conditionals``) in the GPU's realisation
        (``gpu``: :attr:`Context.gpu_graph`) or the CPU's. True unless an op says
        otherwise: a pipeline of ops that do not branch is built without DALI's AutoGraph."""
        return True

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """Which of :meth:`sample`'s parameters the DALI graph reads (all by default);
        only these are fed, so DALI copies nothing it does not use."""
        return names

    def torchvision(self) -> Any:
        """The torchvision v2 transform a user would write for this op."""
        raise NotImplementedError(f"{self.name} has no torchvision equivalent")

    # ------------------------------------------------------------ boxes and masks

    #: True when the op leaves every pixel where it is (colour, blur): a sample's boxes
    #: and masks are the same after it. Pointwise ops are such ops.
    keeps_places: ClassVar[bool] = False

    def in_place(self) -> bool:
        """Whether every pixel stays where it is (colour, blur): such an op may also run
        on the whole image before the crop."""
        return self.pointwise or self.keeps_places

    def moves_targets(self) -> bool:
        """Whether boxes and masks pass through this op: it keeps pixels in place, or it
        says how it moves them (overriding the three ``move_*`` methods)."""
        return self.pointwise or self.keeps_places

    def move_boxes(self, boxes: Boxes, params: Params, ctx: Context) -> Boxes:
        """The batch's boxes after this op, from its drawn ``params`` (the boxes of the
        images it is given, in their pixels)."""
        self.require_targets()
        return boxes

    def move_mask_torch(self, mask: Tensor, p: Row, ctx: Context) -> Tensor:
        """One sample's uint8 ``[C, H, W]`` mask after this op (nearest neighbour)."""
        self.require_targets()
        return mask

    def move_masks_dali(self, masks: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        """The batch's uint8 HWC masks after this op, in DALI (nearest neighbour)."""
        self.require_targets()
        return masks

    def require_targets(self) -> None:
        """Refuse, in one line naming the op, to move boxes and masks it cannot move."""
        if not self.moves_targets():
            raise ConfigError(
                f"augment op {self.name} moves pixels but not boxes and masks; a detection or "
                "segmentation pipeline takes crops, flips and colour ops: remove it from augment"
            )


#: The crops' resize filters: torchvision's antialiased ``InterpolationMode`` of each.
RESAMPLING = ("bilinear", "bicubic")


class CropOp(Op):
    """The decode-fused first step of a split: where to decode, how to resize and crop.

    Both backends realise the :class:`~dali_pipes.augment.geometry.Geometry` it plans (DALI decodes
    only the window); its output size is the size every later op sees.
    """

    size: int
    #: The resize's filter (antialiased): "bilinear" or "bicubic" (:data:`RESAMPLING`). A
    #: crop that resizes declares it as a field; both backends realise it.
    interpolation: str = "bilinear"

    def check_interpolation(self) -> None:
        """Validate ``interpolation`` (for ``__post_init__``)."""
        require(
            self.interpolation in RESAMPLING,
            "interpolation",
            self.interpolation,
            f"choose one of {', '.join(RESAMPLING)}",
        )

    def resampled(self, geometry: Geometry) -> Geometry:
        """``geometry`` resized with this crop's filter."""
        return replace(geometry, interpolation=self.interpolation)

    def resize_transform(self, resize: Any) -> Any:
        """torchvision's ``v2.Resize(resize)`` with this crop's filter, antialiased."""
        from torchvision.transforms import v2

        mode = v2.InterpolationMode(self.interpolation)
        return v2.Resize(resize, interpolation=mode, antialias=True)

    def size_at(self, epoch: int) -> int:
        """The output side in ``epoch`` (``size`` unless the crop has a resolution schedule)."""
        return self.size

    def shape_at(self, epoch: int) -> tuple[int, int]:
        """(height, width) of the output in ``epoch``: square unless a crop says otherwise."""
        side = self.size_at(epoch)
        return (side, side)

    def pad_fill(self) -> tuple[int, int, int] | None:
        """The colour a window reaching past the image is padded with (torchvision's
        ``fill``); None when the crop's windows always lie inside the image, which lets
        the DALI backend decode only the window."""
        return None

    @abstractmethod
    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        """Geometry in ``epoch`` for images of ``sizes`` ([B, 2] height, width) from ``u``."""

    #: True when where the crop goes depends on the sample's boxes (SSD's IoU crop): the
    #: pipeline then plans it with :meth:`plan_around`.
    needs_boxes: ClassVar[bool] = False

    def varies_in_size(self) -> bool:
        """Whether each image comes out at a size of its own (a shorter side with a
        maximum, as detection references resize): the geometry's ``outs``; a batch's
        images are then a list of ``[3, H, W]`` tensors and :meth:`shape_at` is the
        largest size."""
        return False

    #: True when the output may reach past the resized window (padded with the fill at the
    #: bottom and right): only a plain split's DALI graph realises it (in bands).
    pads_past_resize: ClassVar[bool] = False

    def plan_around(self, sizes: np.ndarray, u: np.ndarray, epoch: int, boxes: Boxes) -> Geometry:
        """:meth:`plan` for images holding ``boxes`` (source pixels); a crop that
        :attr:`needs_boxes` overrides it."""
        return self.plan(sizes, u, epoch)

    def boxes_kept(self, boxes: Boxes, geometry: Geometry) -> np.ndarray:
        """Which of ``boxes`` (source pixels, bool ``[K]``) the crop keeps before they are
        clipped to the output: all, unless the crop drops some by a rule of its own."""
        return np.ones(len(boxes.labels), bool)

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        return {}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        return image  # realised by dali_pipes.augment.geometry_torch.apply_geometry

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        return images  # realised by the DALI backend's decoder and resize


# --------------------------------------------------------------------------- registry

#: Every op by its config name (:mod:`dali_pipes.registry`).
OPS: Registry[type[Op]] = Registry("op")


@overload
def register_op(cls: OpClass, *, replace: bool = False) -> OpClass: ...
@overload
def register_op(cls: None = None, *, replace: bool = False) -> Callable[[OpClass], OpClass]: ...
def register_op(cls: OpClass | None = None, *, replace: bool = False) -> Any:
    """Class decorator: make ``cls`` usable by its ``name`` in the config.

    Args:
        cls: an :class:`Op` subclass (a frozen dataclass) with a class attribute ``name``.
        replace: put it there even when another op holds the name
            (``@register_op(replace=True)``).

    Returns:
        ``cls`` itself, registered: ``augment.train.ops.<name>`` builds it from its fields.
        (Called with ``replace`` alone, the decorator that registers so.)

    Raises:
        NameTaken: another class holds the name (one name, one op); a ``ValueError``.
        TypeError: ``cls`` has no ``name``.
    """
    if cls is None:
        return lambda c: register_op(c, replace=replace)
    register_class(OPS, cls, replace=replace)
    return cls


def register_class(registry: Registry[Any], cls: type, *, replace: bool = False) -> None:
    """Put ``cls`` into ``registry`` under its class attribute ``name`` (the op and batch-op
    registries): another class under a taken name is refused unless ``replace``."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__qualname__} needs a class attribute `name` to be registered")
    registry.register(name, cls, replace=replace)


def construct(cls: type[T], params: Mapping[str, Any], key: str, name: str) -> T:
    """``cls(**params)`` for the config entry at ``key``: an unknown parameter or a value
    the class refuses is a one-line :class:`ConfigError` naming the key."""
    allowed = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    for param in params:
        if param not in allowed:
            raise ConfigError(
                f"{key}.{param} is not a parameter of {name}; "
                f"its parameters are {', '.join(allowed) or '(none)'}"
            )
    try:
        return cls(**params)
    except ConfigError as exc:
        raise ConfigError(f"{key}.{exc}") from None


def op_names(crop: bool | None = None) -> tuple[str, ...]:
    """Registered op names (``crop=True``: only crops, ``False``: only the others)."""
    return tuple(sorted(n for n, c in OPS.items() if crop is None or issubclass(c, CropOp) == crop))


def build_op(entry: Any, key: str, default_name: str | None = None, crop: bool = False) -> Op:
    """An op from a config entry: an :class:`Op`, or a mapping of its parameters.

    The op's name is the mapping's ``op`` key, else ``default_name`` (the entry's key in
    ``ops``). Errors name ``key`` and, for an unknown name, the known ops.
    """
    kind = "crop" if crop else "op"
    if isinstance(entry, Op):
        op = entry
    else:
        if not isinstance(entry, Mapping):
            raise ConfigError(
                f"{key}={entry!r} is invalid: expected the {kind}'s parameters as a mapping"
            )
        params = {str(k): v for k, v in entry.items()}
        name = params.pop("op", default_name)
        cls = OPS.get(str(name)) if name is not None else None
        if cls is None or issubclass(cls, CropOp) != crop:
            raise ConfigError(
                f"{key}: unknown {kind} {name!r}; known {kind}s: {', '.join(op_names(crop))}"
            )
        op = construct(cls, params, key, str(name))
    if isinstance(op, CropOp) != crop:
        raise ConfigError(f"{key}: {op.name} cannot be used as a{' crop' if crop else 'n op'}")
    return op
