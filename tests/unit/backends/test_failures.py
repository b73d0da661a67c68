"""Failures tell a bad file from a full or broken GPU; the search for a bad file uses the
graph's own decoder and is bounded; shard indices and exits fail or finish cleanly; DALI on
the CPU can hand its batches to a GPU model ("dali-cpu")."""

from __future__ import annotations

import shlex
import subprocess
import sys
import textwrap
import threading
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import HAS_CUDA, REPO, gpu
from helpers.errors import folder_cfg, one_line, small_tree
from helpers.warm import python
from torchvision.io import encode_jpeg

from dali_pipes import DataError, DeviceError, build_loader, compose_config
from dali_pipes.backends.dali import lifecycle as dali_lifecycle
from dali_pipes.backends.dali import loader as dali_backend
from dali_pipes.backends.dali.blame import BadFileSearch, Probe
from dali_pipes.backends.dali.failures import failure_kind
from dali_pipes.backends.dali.failures import reason as one_line_reason
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.config.specs import loader_spec
from dali_pipes.tools.pack import run_pack

ROOT = REPO
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def jpeg_bytes(h: int, w: int, seed: int = 0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, size=(h, w, 3), dtype=np.uint8)
    return bytes(encode_jpeg(torch.from_numpy(pixels).permute(2, 0, 1).contiguous()).numpy())


def scanless_jpeg() -> bytes:
    """A JPEG whose headers are intact (so its size reads fine) but which has no scan:
    every decoder rejects it, only when decoding."""
    good = jpeg_bytes(24, 32)
    return good[: good.index(b"\xff\xda")] + b"\xff\xd9"


def dali_error(message: str, device: str = "MIXED", op: str = "decoders.image_slice") -> str:
    """``message`` wrapped the way DALI 2.4 reports an operator's error (the frame seen on
    real decoder failures; see ``live_decode_error``)."""
    return (
        "Critical error in pipeline:\n"
        f"Error in {device} operator `nvidia.dali.fn.{op}`,\n"
        "which was used in the pipeline definition with the following traceback:\n\n"
        '  File "/work/main/dali_pipes/backends/dali/loader.py", line 448, in _decode\n'
        f"    return fn.{op}(\n\n"
        "encountered:\n\n"
        f"{message}\n"
        "Current pipeline object is no longer valid."
    )


@pytest.fixture(scope="module")
def live_decode_error() -> RuntimeError:
    """What DALI's CPU decoder really raises for a file that is not an image."""
    from nvidia.dali import fn, types
    from nvidia.dali.pipeline import Pipeline

    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1)
    with pipe:
        encoded = fn.external_source(name="encoded", dtype=types.UINT8)
        pipe.set_outputs(fn.decoders.image(encoded, device="cpu", output_type=types.RGB))
    pipe.build()
    with pytest.raises(RuntimeError) as exc:
        pipe.run(encoded=[np.frombuffer(scanless_jpeg(), np.uint8)])
    return exc.value


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        # DALI 2.4: nvImageCodec's status for a corrupt / unsupported stream, per-sample
        # failure; the decoder's allocator failing; CUDABadAlloc; CUDAError.
        (RuntimeError(dali_error("nvImageCodec failure: '#3'", "CPU")), "data"),
        (RuntimeError(dali_error("nvImageCodec failure: '#4'")), "data"),
        (RuntimeError(dali_error("Failed to decode sample #17 : ")), "data"),
        (RuntimeError(dali_error("nvImageCodec failure: '#5'")), "memory"),
        (RuntimeError(dali_error("Can't allocate 268435456 bytes on device 0.")), "memory"),
        (RuntimeError(dali_error("CUDA allocation failed")), "memory"),
        (
            RuntimeError(
                dali_error("CUDA runtime API error cudaErrorMemoryAllocation (2):\nout of memory")
            ),
            "memory",
        ),
        (
            RuntimeError(
                dali_error(
                    "CUDA runtime API error cudaErrorIllegalAddress (700):\n"
                    "an illegal memory access was encountered",
                    op="resize",
                )
            ),
            "device",
        ),
        (RuntimeError(dali_error("nvImageCodec failure: '#21'")), "device"),
        # torch
        (
            torch.cuda.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                "of 79.10 GiB of which 1.06 GiB is free."
            ),
            "memory",
        ),
        (
            RuntimeError(
                "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might "
                "be asynchronously reported at some other API call, so the stacktrace below "
                "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
            ),
            "device",
        ),
        (RuntimeError("CUDA error: device-side assert triggered"), "device"),
        (
            RuntimeError(
                "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with "
                "NCCL_DEBUG=INFO for details), NCCL version 2.21.5"
            ),
            "device",
        ),
        (MemoryError(), "memory"),
        # ours and everything else: never searched, never annotated
        (DataError("/data/a.jpg: cannot read (No such file or directory)"), "other"),
        (RuntimeError("expected scalar type Float but found Half"), "other"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_failure_kind_tells_memory_and_gpu_errors_from_bad_files(
    exc: BaseException, kind: str
) -> None:
    assert failure_kind(exc) == kind


def test_a_real_dali_decoder_error_is_data_and_its_reason_one_line(
    live_decode_error: RuntimeError,
) -> None:
    assert failure_kind(live_decode_error) == "data"
    reason = one_line_reason(live_decode_error)
    assert "\n" not in reason and "pipeline" not in reason.lower()
    assert reason.startswith(("nvImageCodec failure", "Failed to decode sample")), reason


# --------------------------------------------------------------------------- propagation


def loader_for(root: Path, *extra: str, split: str = "val") -> Any:
    return build_loader(folder_cfg(root, *extra), split)


GPU_FAILURES = [
    torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB"),
    RuntimeError("CUDA error: an illegal memory access was encountered"),
    RuntimeError(dali_error("Can't allocate 268435456 bytes on device 0.")),
]


@pytest.mark.parametrize("failure", GPU_FAILURES, ids=["torch-oom", "cuda-error", "dali-oom"])
def test_gpu_failures_while_producing_a_batch_propagate_unchanged_with_a_hint_and_no_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    small_tree(tmp_path, {"a": 3})
    message = str(failure)

    def broken(*args: Any, **kwargs: Any) -> Any:  # DALI's outputs -> torch, failing
        raise failure

    def never(*args: Any) -> Any:
        raise AssertionError("searched for a bad file after a GPU failure")

    monkeypatch.setattr(dali_backend, "to_torch", broken)
    monkeypatch.setattr(BadFileSearch, "culprits", never)
    monkeypatch.setattr(Probe, "__call__", never)
    loader = loader_for(tmp_path)
    with pytest.raises(type(failure)) as exc:
        next(iter(loader))
    assert exc.value is failure and type(exc.value) is type(failure)
    assert not isinstance(exc.value, DataError) and str(exc.value) == message
    (note,) = exc.value.__notes__
    assert "\n" not in note and "not a bad file" in note
    if failure_kind(failure) == "memory":
        assert "data.batch_size" in note
    else:
        assert "CUDA_LAUNCH_BLOCKING=1" in note
    loader.close()


# --------------------------------------------------------------------------- the search


def test_a_file_only_the_decoder_rejects_is_named_or_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_tree(tmp_path, {"a": 3, "b": 2})
    bad = tmp_path / "a" / "1b_no_scan.jpg"
    bad.write_bytes(scanless_jpeg())  # its header reads fine: DALI's decoder finds it
    probed: list[int] = []
    real = Probe.__call__

    def counting(self: Probe, *args: Any) -> str:
        probed.append(1)
        return real(self, *args)

    monkeypatch.setattr(Probe, "__call__", counting)
    with pytest.raises(DataError) as exc:
        list(loader_for(tmp_path))
    assert str(bad) in one_line(exc) and probed
    loader = loader_for(tmp_path, "data.on_error=drop")
    assert sum(len(labels) for _, labels in loader) == 5
    assert list(loader.bad_files) == [str(bad)]


def test_a_decoder_error_no_file_explains_stays_dalis_error_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_tree(tmp_path, {"a": 3})
    failure = RuntimeError(dali_error("Failed to decode sample #1 : "))

    def broken(*args: Any, **kwargs: Any) -> Any:  # DALI's outputs -> torch, failing
        raise failure

    monkeypatch.setattr(dali_backend, "to_torch", broken)
    with pytest.raises(RuntimeError) as exc:
        next(iter(loader_for(tmp_path)))
    assert exc.value is failure and not isinstance(exc.value, DataError)
    (note,) = exc.value.__notes__
    assert "decodes alone with the same decoder" in note and "no file is to blame" in note
    assert str(tmp_path / "a" / "0.jpg") in note and "\n" not in note


def test_a_loaders_searches_share_one_probe_rebuilt_only_after_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three files only the decoder rejects, each first in its batch of two: three searches.
    A probe of its own per search built one pipeline for the search and one after its bad
    file (6); the loader's one probe builds one at first and one after each bad file (4).
    On a GPU a build costs about as much as decoding hundreds of files."""
    small_tree(tmp_path, {"a": 6})
    bad = [tmp_path / "a" / f"{k}.jpg" for k in (0, 2, 4)]
    for path in bad:
        path.write_bytes(scanless_jpeg())
    builds: list[int] = []
    real = Probe._build

    def counted(self: Probe) -> Any:
        builds.append(1)
        return real(self)

    monkeypatch.setattr(Probe, "_build", counted)
    loader = loader_for(tmp_path, "data.on_error=drop", "backend.prefetch_queue_depth=1")
    assert sum(len(labels) for _, labels in loader) == 3
    assert sorted(loader.bad_files) == [str(p) for p in bad]
    assert len(builds) == len(bad) + 1
    loader.close()


def test_a_loader_collected_on_another_thread_leaves_its_probes_pipeline_to_its_own(
    tmp_path: Path,
) -> None:
    """The probe's pipeline lives as long as its loader: like the loader's own, it is never
    destroyed on the thread that happens to collect the loader (a DALI thread may: see
    backends/dali/lifecycle.py), but kept until a thread of the program's releases it."""
    small_tree(tmp_path, {"a": 4})
    (tmp_path / "a" / "0.jpg").write_bytes(scanless_jpeg())  # first: the probe goes on after it
    loader = loader_for(tmp_path, "data.on_error=drop", "backend.prefetch_queue_depth=1")
    assert sum(len(labels) for _, labels in loader) == 3
    probe_pipe = loader._probe._pipe
    assert probe_pipe is not None
    orphans = dali_lifecycle._orphans
    collector = threading.Thread(target=loader.__del__)
    collector.start()
    collector.join()
    assert loader._probe._pipe is None and any(p is probe_pipe for p in orphans)
    del probe_pipe
    dali_lifecycle.release_orphans()  # here, on a thread of the program's own
    assert not orphans
    loader.close()


@pytest.mark.parametrize("where", ["header", "decoder"])
def test_a_failed_pipeline_is_destroyed_before_its_error_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The error a DALI loader raises holds no pipeline, however long the caller keeps it.

    Held by the error's traceback, the failed pipeline was destroyed whenever the error was
    collected: ``make test`` aborted ("Resource deadlock avoided") when the collector ran
    on one of that pipeline's own threads, still resizing its prefetched batches. A file
    that is not an image fails in the feed, inside DALI's ``schedule_run``; one whose
    header reads fine fails in DALI's decoder, and the search for it runs the probe's
    pipeline, which fails too."""
    small_tree(tmp_path, {"a": 4})
    bad = tmp_path / "a" / "1b_bad.jpg"
    bad.write_bytes(b"not an image at all" if where == "header" else scanless_jpeg())
    built: list[weakref.ref[Any]] = []
    hold = dali_lifecycle.hold

    def watched(pipe: Any) -> Any:
        built.append(weakref.ref(pipe))
        return hold(pipe)

    monkeypatch.setattr(dali_lifecycle, "hold", watched)
    loader = loader_for(tmp_path)
    with pytest.raises(DataError) as kept:  # kept, as a caller may keep it
        list(loader)
    assert str(bad) in one_line(kept)
    main, *probes = built
    assert main() is None, "the loader's failed pipeline outlived the failure"
    if where == "decoder":  # the probe's first pipeline failed on the file; a new one goes on
        assert len(probes) == 2 and probes[0]() is None, "the probe's failed pipeline lived on"
    else:
        assert not probes
    assert kept.traceback[-1].frame.code.name, "the traceback still says where"
    loader.close()
    assert all(pipe() is None for pipe in built)


@pytest.mark.parametrize("roi", [True, False])
def test_the_probe_decodes_with_the_graphs_own_op_and_crop_window(
    tmp_path: Path, roi: bool
) -> None:
    """A truncated JPEG: its top rows decode, the rest does not. Region decoding of a window
    in the top rows succeeds, so a file is blamed only where the graph's decoder fails."""
    small_tree(tmp_path, {"a": 2})
    data = jpeg_bytes(240, 320, seed=2)
    blob = np.frombuffer(data[: len(data) // 8], np.uint8)
    loader = loader_for(tmp_path, f"backend.roi_decode={str(roi).lower()}")
    probe = Probe(loader.graph, loader.device_hint)
    top = probe(blob, np.array([0, 0], np.float32), np.array([16, 8], np.float32))
    bottom = probe(blob, np.array([0, 200], np.float32), np.array([16, 8], np.float32))
    probe.close()
    assert bottom and "\n" not in bottom
    assert (top == "") is roi, top


@pytest.mark.parametrize(("limit", "value"), [("probe_limit", 1), ("probe_seconds", 0.0)])
def test_the_search_for_a_bad_file_is_bounded_and_names_the_suspects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str, value: float
) -> None:
    small_tree(tmp_path, {"a": 3})
    bad = tmp_path / "a" / "0b_no_scan.jpg"  # second in the first batch (0.jpg is first)
    bad.write_bytes(scanless_jpeg())
    monkeypatch.setattr(DaliLoader, limit, value)
    with pytest.raises(DataError) as exc:
        list(loader_for(tmp_path, "data.batch_size=4"))
    message = one_line(exc)
    assert message.startswith("DALI failed on a batch (")
    assert "the search for the file stopped after" in message and str(bad) in message


# --------------------------------------------------------------------------- shard indices


def test_a_missing_shard_index_names_it_and_the_command_that_writes_it(
    identity_tree: Path, tmp_path: Path
) -> None:
    out = tmp_path / "packed"
    run_pack(
        compose_config(
            ["data=folder", f"data.root={identity_tree}", f"out={out}", "pack.shard_size_mb=0.004"],
            config_name="pack",
        )
    )
    cfg = compose_config(
        [
            "data=shards",
            f"data.root={out}",
            "backend=dali",
            "backend.device=cpu",
            "data.batch_size=4",
            "augment.val.crop.resize=16",
            "augment.val.crop.size=16",
        ]
    )
    tar = sorted(out.rglob("*.tar"))[1]
    idx = tar.with_suffix(".idx")
    loader = build_loader(cfg, "val")  # reads the indices: they are all there
    idx.unlink()
    with pytest.raises(DataError) as at_read:
        list(loader)
    with pytest.raises(DataError) as at_open:
        build_loader(cfg, "val")
    for exc in (at_read, at_open):
        message = one_line(exc)
        assert message.startswith(f"{idx}: shard index missing")
        assert "python -m dali_pipes.pack" in message
    command = one_line(at_read).split("write it with: ", 1)[1].split(" -- ", 1)[0]
    tool, *args = shlex.split(command)
    subprocess.run([str(Path(sys.executable).parent / tool), *args], check=True)
    assert sum(len(labels) for _, labels in build_loader(cfg, "val")) == 17


# --------------------------------------------------------------------------- clean exit


@pytest.mark.slow
@pytest.mark.parametrize("augment", [None, "deit"])
def test_a_script_that_stops_after_the_first_batch_exits_cleanly(
    identity_tree: Path, augment: str | None
) -> None:
    script = textwrap.dedent(
        f"""
        from dali_pipes import DALIIterator

        loader = DALIIterator(
            {str(identity_tree)!r}, batch_size=4, device="cpu", image_size=16,
            augment={augment!r}, num_threads=1,
        )
        images, labels = next(iter(loader))
        print(tuple(images.shape))
        """
    )
    done = subprocess.run(
        [python(), "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(4, 3, 16, 16)"
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


# --------------------------------------------------------------------------- dali-cpu


def graph_ops(loader: DaliLoader) -> tuple[Any, list[tuple[str, str, list[str]]]]:
    """The loader's pipeline, defined and traced but not built (no device needed), with
    each operator's (name, device, its inputs' devices). White-box: DALI's graph."""
    pipe = loader._define()
    pipe._build_graph()
    ops = [(op.name, op._op.device, [i.device for i in op.inputs]) for op in pipe._ops]
    return pipe, ops


def test_without_an_output_device_the_dali_pipeline_is_the_cpu_one(identity_tree: Path) -> None:
    cfg = folder_cfg(identity_tree, "data.batch_size=4")
    spec = loader_spec(cfg, "train")
    assert spec.output_device is None
    loader = DaliLoader(spec)
    assert loader.made == loader.device == torch.device("cpu")
    pipe, ops = graph_ops(loader)
    assert pipe.device_id is None and {device for _, device, _ in ops} == {"cpu"}
    assert [node.device for node in pipe._graph_outputs] == ["cpu", "cpu"]
    # The same batches as when the output device is named and is the CPU.
    named = DaliLoader(replace(spec, output_device="cpu"))
    for (x, y), (x2, y2) in zip(loader, named, strict=True):
        assert x.device.type == "cpu" and torch.equal(x, x2) and torch.equal(y, y2)


def test_dali_cpu_for_a_gpu_model_decodes_on_the_cpu_and_lets_dali_copy_to_the_gpu(
    identity_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked on the traced graph, so it runs without a GPU: every operator up to the
    normalisation on the CPU, the normalisation on the GPU fed by DALI's copy."""
    monkeypatch.setattr(
        dali_backend, "loader_devices", lambda spec: (torch.device("cpu"), torch.device("cuda", 0))
    )
    monkeypatch.setattr(dali_backend, "require_dali_gpu", lambda *devices: None)
    spec = loader_spec(folder_cfg(identity_tree, "augment=randaugment"), "train")
    loader = DaliLoader(spec)
    assert loader.made == torch.device("cpu") and loader.device == torch.device("cuda", 0)
    pipe, ops = graph_ops(loader)
    assert pipe.device_id == 0
    (normalise,) = [op for op in ops if "CropMirrorNormalize" in op[0]]
    assert normalise[1:] == ("gpu", ["gpu"])  # on the GPU, fed by DALI's copy
    others = [op for op in ops if op is not normalise]
    assert all(device == "cpu" for _, device, _ in others), others
    assert [node.device for node in pipe._graph_outputs] == ["gpu", "gpu"]


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU message")
def test_dali_cpu_for_a_gpu_model_without_a_gpu_says_so_in_one_line(identity_tree: Path) -> None:
    spec = loader_spec(folder_cfg(identity_tree), "train")
    with pytest.raises(DeviceError) as exc:
        DaliLoader(replace(spec, output_device="cuda:0"))
    assert "output_device" in one_line(exc)


@gpu
@pytest.mark.parametrize("split", ["train", "val"])
def test_dali_cpu_yields_cuda_batches_with_the_cpu_loaders_pixels(
    identity_tree: Path, split: str
) -> None:
    spec = loader_spec(folder_cfg(identity_tree, "data.batch_size=4"), split)
    cpu = DaliLoader(spec)
    to_gpu = DaliLoader(replace(spec, output_device="cuda:0"))
    assert to_gpu.made == torch.device("cpu") and to_gpu.device == torch.device("cuda", 0)
    std = torch.tensor(STD).view(1, 3, 1, 1) * 255
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    for epoch in (0, 1):
        cpu.set_epoch(epoch)
        to_gpu.set_epoch(epoch)
        for (x, y), (xg, yg) in zip(cpu, to_gpu, strict=True):
            assert xg.device == yg.device == torch.device("cuda", 0)
            assert torch.equal(yg.cpu(), y)
            # The GPU normalises with a fused multiply-add: equal to float rounding...
            torch.testing.assert_close(xg.cpu(), x, rtol=0, atol=1e-5)
            # ... and the pixels themselves identical.
            assert torch.equal(
                (xg.cpu() * std + mean).round().to(torch.uint8),
                (x * std + mean).round().to(torch.uint8),
            )
