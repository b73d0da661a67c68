"""Placement: where batches are made (backend.device) vs where the model trains
(trainer.device), one GPU per process, Slurm's ranks, and the doctor's choice.

The decisions are checked on any machine with ``torch.cuda.is_available`` and
``device_count`` patched (nothing touches a real GPU there); the ``gpu``-marked tests run
the real hand-overs when a session has one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import gpu

from dali_pipes import build_loader, compose_config
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import torch as torch_backend
from dali_pipes.backends.base import loader_devices
from dali_pipes.backends.handover import Normalizer, normalized, prefetched
from dali_pipes.backends.specs import DaliBackend, TorchBackend
from dali_pipes.backends.synthetic import SyntheticLoader
from dali_pipes.config.loaders import devices_of, model_device
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import ConfigError, DeviceError
from dali_pipes.runtime import devices as device_mod
from dali_pipes.runtime.devices import Devices, local_gpu, resolve_device, resolve_devices
from dali_pipes.runtime.distributed import Ranks, cpu_share, ranks, slurm_tasks_on_node
from dali_pipes.tools.doctor import Candidate, _pick, candidates, placement_table

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a plain single process, whatever launched pytest."""
    for key in list(os.environ):
        if key in LAUNCH_VARS or key.startswith("SLURM_"):
            monkeypatch.delenv(key)


def cuda(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Pretend ``count`` CUDA devices are visible (0: CUDA unusable)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------- the pair

GPU0 = torch.device("cuda", 0)

#: (backend.device, trainer.device) -> (made, model) on a machine with one GPU.
WITH_GPU = {
    ("gpu", "auto"): (GPU0, GPU0),
    ("gpu", "cuda"): (GPU0, GPU0),
    ("auto", "auto"): (GPU0, GPU0),
    ("auto", "cuda"): (GPU0, GPU0),
    ("auto", "cpu"): (CPU, CPU),
    ("cpu", "auto"): (CPU, CPU),
    ("cpu", "cuda"): (CPU, GPU0),
    ("cpu", "cpu"): (CPU, CPU),
}
#: The same without CUDA: every pair that does not ask for CUDA runs on the CPU.
WITHOUT_GPU = {
    ("auto", "auto"): (CPU, CPU),
    ("auto", "cpu"): (CPU, CPU),
    ("cpu", "auto"): (CPU, CPU),
    ("cpu", "cpu"): (CPU, CPU),
}


@pytest.mark.parametrize(("pair", "expected"), WITH_GPU.items())
def test_each_valid_pair_places_batches_and_model_as_the_table_says_with_a_gpu(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[str, str], expected: tuple[torch.device, ...]
) -> None:
    cuda(monkeypatch, 1)
    assert resolve_devices(*pair, "dali") == Devices(*expected)


@pytest.mark.parametrize(("pair", "expected"), WITHOUT_GPU.items())
def test_each_pair_not_asking_for_cuda_runs_on_the_cpu_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[str, str], expected: tuple[torch.device, ...]
) -> None:
    cuda(monkeypatch, 0)
    assert resolve_devices(*pair, "dali") == Devices(*expected)


@pytest.mark.parametrize("gpus", [0, 1])
def test_batches_made_on_the_gpu_for_a_model_on_the_cpu_are_refused_naming_both_keys(
    monkeypatch: pytest.MonkeyPatch, gpus: int
) -> None:
    cuda(monkeypatch, gpus)
    with pytest.raises(DeviceError) as exc:
        resolve_devices("gpu", "cpu", "dali")
    text = one_line(exc)
    assert "backend.device=gpu" in text and "trainer.device=cpu" in text
    assert "backend.device=cpu" in text  # what to do


# ids spelt out: a bare "gpu" id would read as the gpu marker and skip the test on a CPU
@pytest.mark.parametrize("backend_device", ["auto", "cpu", "gpu"], ids=lambda v: f"backend-{v}")
def test_cuda_for_the_model_without_cuda_says_what_to_use_instead(
    monkeypatch: pytest.MonkeyPatch, backend_device: str
) -> None:
    cuda(monkeypatch, 0)
    with pytest.raises(DeviceError) as exc:
        resolve_devices(backend_device, "cuda", "dali")
    text = one_line(exc)
    key = "backend.device=gpu" if backend_device == "gpu" else "trainer.device=cuda"
    assert key in text and "is_available() is False" in text


def test_gpu_batches_without_cuda_keep_their_message(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda(monkeypatch, 0)
    with pytest.raises(DeviceError) as exc:
        resolve_device("gpu", "torch")
    assert "backend.device=gpu" in one_line(exc) and "backend.device=cpu" in str(exc.value)


def test_resolve_device_is_the_backend_alone_so_trainer_auto(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 1)
    for backend_device in ("auto", "gpu", "cpu"):
        expected = resolve_devices(backend_device, "auto", "dali").made
        assert resolve_device(backend_device, "dali") == expected


@pytest.mark.parametrize(
    ("value", "hint"), [("gpu", "backend.device says gpu"), ("tpu", "auto"), ("cuda:0", "auto")]
)
def test_an_unknown_trainer_device_names_the_key_and_the_choices(value: str, hint: str) -> None:
    with pytest.raises(ConfigError) as exc:
        TrainerSpec(device=value)
    text = one_line(exc)
    assert f"trainer.device={value!r}" in text and hint in text and "cuda" in text


def test_trainer_device_is_validated_when_the_config_is_read() -> None:
    cfg = compose_config(["data=synthetic", "trainer.device=gpu"])
    with pytest.raises(ConfigError, match=r"trainer\.device='gpu' is invalid"):
        to_spec(cfg.trainer, TrainerSpec)
    with pytest.raises(ConfigError, match=r"trainer\.device='gpu' is invalid"):
        model_device(cfg)
    assert to_spec(compose_config(["data=synthetic"]).trainer, TrainerSpec).device == "auto"


def test_the_choice_is_logged_once_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cuda(monkeypatch, 1)
    monkeypatch.setattr(device_mod, "_logged", set())
    with caplog.at_level("INFO", logger="dali_pipes.runtime.devices"):
        for _ in range(3):
            resolve_devices("cpu", "cuda", "dali")
    lines = [r.getMessage() for r in caplog.records if r.name == "dali_pipes.runtime.devices"]
    assert lines == [
        "placement: backend=dali device=cpu makes batches on cpu, the model trains on cuda:0 "
        "(trainer.device=cuda)"
    ]


# --------------------------------------------------------------------------- one GPU per process


@pytest.mark.parametrize(("local_rank", "count", "expected"), [(0, 8, 0), (5, 8, 5), (3, 4, 3)])
def test_the_local_rank_picks_its_gpu_when_all_are_visible(
    monkeypatch: pytest.MonkeyPatch, local_rank: int, count: int, expected: int
) -> None:
    cuda(monkeypatch, count)
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    assert local_gpu() == torch.device("cuda", expected)


@pytest.mark.parametrize("local_rank", [1, 7])
def test_a_process_that_sees_one_gpu_uses_it_whatever_its_local_rank(
    monkeypatch: pytest.MonkeyPatch, local_rank: int
) -> None:
    """srun --gpus-per-task=1, or a per-rank CUDA_VISIBLE_DEVICES: each rank's GPU is its
    device 0."""
    cuda(monkeypatch, 1)
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    assert local_gpu() == GPU0
    assert resolve_devices("gpu", "cuda", "dali") == Devices(GPU0, GPU0)
    assert resolve_devices("cpu", "cuda", "dali") == Devices(CPU, GPU0)


def test_more_local_ranks_than_visible_gpus_fail_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 2)
    monkeypatch.setenv("LOCAL_RANK", "3")
    with pytest.raises(DeviceError) as exc:
        resolve_devices("auto", "auto", "dali")
    text = one_line(exc)
    assert "LOCAL_RANK=3" in text and "2 CUDA devices" in text and "--gpus-per-task=1" in text


def test_the_one_gpu_error_names_slurms_variable_under_srun(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 2)
    slurm(monkeypatch, procid=3, ntasks=4, localid=3)
    with pytest.raises(DeviceError, match=r"SLURM_LOCALID=3 but 2 CUDA devices"):
        local_gpu()


def test_a_cpu_model_needs_no_gpu_whatever_the_local_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 2)
    monkeypatch.setenv("LOCAL_RANK", "5")
    assert resolve_devices("cpu", "auto", "dali") == Devices(CPU, CPU)
    assert resolve_devices("auto", "cpu", "dali") == Devices(CPU, CPU)


# --------------------------------------------------------------------------- Slurm


def slurm(
    monkeypatch: pytest.MonkeyPatch,
    *,
    procid: int,
    ntasks: int,
    localid: int,
    step: bool = True,
    **extra: str,
) -> None:
    """The variables srun sets for one task of a job step."""
    env = {
        "SLURM_JOB_ID": "42",
        "SLURM_PROCID": str(procid),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_LOCALID": str(localid),
        **({"SLURM_STEP_ID": "0"} if step else {}),
        **extra,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_srun_tasks_get_their_ranks_from_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    slurm(monkeypatch, procid=13, ntasks=16, localid=5, SLURM_NTASKS_PER_NODE="8")
    assert ranks() == Ranks(13, 16, 5, 8, "slurm")


@pytest.mark.parametrize(("node", "expected"), [(0, 2), (2, 2), (3, 1)])
def test_the_local_world_comes_from_slurms_compressed_tasks_per_node(
    monkeypatch: pytest.MonkeyPatch, node: int, expected: int
) -> None:
    slurm(
        monkeypatch,
        procid=0,
        ntasks=7,
        localid=0,
        SLURM_TASKS_PER_NODE="2(x3),1",
        SLURM_NODEID=str(node),
    )
    assert ranks().local_world_size == expected


def test_tasks_per_node_lists_are_expanded() -> None:
    assert [slurm_tasks_on_node("2(x3),1", n) for n in range(4)] == [2, 2, 2, 1]
    assert slurm_tasks_on_node("8", 0) == 8
    with pytest.raises(ConfigError, match=r"SLURM_TASKS_PER_NODE='eight' is invalid"):
        slurm_tasks_on_node("eight", 0)


def test_torchrun_variables_win_over_slurms(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchrun started under srun (one task per node) describes its own processes."""
    slurm(monkeypatch, procid=1, ntasks=2, localid=0, SLURM_NTASKS_PER_NODE="1")
    for key, value in {"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert ranks() == Ranks(9, 16, 1, 8, "torchrun")


def test_a_batch_script_outside_an_srun_step_is_a_single_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """sbatch runs the script once, with the allocation's SLURM_NTASKS: believing it was
    one of 8 processes would wait for 7 that never start."""
    slurm(monkeypatch, procid=0, ntasks=8, localid=0, step=False)
    assert ranks() == Ranks()


def test_a_malformed_rank_variable_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    slurm(monkeypatch, procid=0, ntasks=2, localid=0, SLURM_PROCID="first")
    with pytest.raises(ConfigError, match=r"SLURM_PROCID='first' is invalid"):
        ranks()


def test_srun_cpus_per_task_is_the_process_share_of_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cores = len(os.sched_getaffinity(0))
    slurm(monkeypatch, procid=0, ntasks=4, localid=0, SLURM_NTASKS_PER_NODE="4")
    assert cpu_share() == max(1, cores // 4)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert cpu_share() == 1


# --------------------------------------------------------------------------- config -> spec


def synthetic_cfg(*overrides: str) -> Any:
    return compose_config(["data=synthetic", "data.num_samples=8", *overrides])


@pytest.mark.parametrize(
    ("overrides", "gpus", "expected"),
    [
        ((), 0, None),
        (("trainer.device=cpu",), 0, None),
        (("backend.device=cpu", "trainer.device=cpu"), 0, None),
        ((), 1, None),
        (("backend.device=cpu",), 1, None),
        (("trainer.device=cuda",), 1, None),
        (("backend.device=gpu", "trainer.device=cuda"), 1, None),
        (("backend.device=cpu", "trainer.device=cuda"), 1, "cuda:0"),
        (("trainer.device=cpu",), 1, "cpu"),
        (("backend.device=cpu", "trainer.device=cpu"), 1, None),
    ],
)
def test_output_device_is_filled_only_when_trainer_device_moves_the_hand_over(
    monkeypatch: pytest.MonkeyPatch,
    overrides: tuple[str, ...],
    gpus: int,
    expected: str | None,
) -> None:
    cuda(monkeypatch, gpus)
    cfg = synthetic_cfg(*overrides)
    spec = loader_spec(cfg, "train")
    assert spec.output_device == expected
    devices = devices_of(cfg)
    assert loader_devices(spec) == (devices.made, devices.model), "the spec says the same"
    assert model_device(cfg) == devices.model


@pytest.mark.parametrize("tool", ["bench", "scan", "doctor"])
def test_tools_that_build_loaders_without_a_model_hand_over_where_batches_are_made(
    monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    cuda(monkeypatch, 1)
    cfg = compose_config(["data=synthetic", "backend.device=cpu"], config_name=tool)
    assert loader_spec(cfg, "train").output_device is None


def test_a_config_without_a_trainer_node_places_like_trainer_auto(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 1)
    cfg = synthetic_cfg("backend.device=cpu")
    del cfg.trainer
    assert loader_spec(cfg, "train").output_device is None
    assert devices_of(cfg) == Devices(CPU, CPU)


def test_an_impossible_pair_fails_when_the_loader_spec_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 1)
    with pytest.raises(DeviceError, match=r"backend\.device=gpu with trainer\.device=cpu"):
        loader_spec(synthetic_cfg("backend.device=gpu", "trainer.device=cpu"), "train")


@pytest.mark.parametrize("value", ["tpu", "mps", "cuda:7"])
def test_a_bad_output_device_in_a_hand_made_spec_is_one_line(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    cuda(monkeypatch, 2)
    spec = loader_spec(synthetic_cfg("backend.device=cpu"), "train")
    from dataclasses import replace

    with pytest.raises((ConfigError, DeviceError)) as exc:
        loader_devices(replace(spec, output_device=value))
    assert f"output_device={value!r}" in one_line(exc)


def test_a_hand_made_spec_may_name_the_gpu_to_hand_over_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    cuda(monkeypatch, 2)
    spec = loader_spec(synthetic_cfg("backend.device=cpu"), "train")
    assert loader_devices(replace(spec, output_device="cuda:1")) == (CPU, torch.device("cuda", 1))
    auto = replace(spec, backend=replace(spec.backend, device="auto"), output_device="cuda:1")
    assert loader_devices(auto) == (torch.device("cuda", 1),) * 2


# --------------------------------------------------------------------------- the backends


@pytest.mark.parametrize("backend", ["torch", "synthetic"])
@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ("backend.device=cpu",),
        ("backend.device=cpu", "trainer.device=cpu"),
        ("trainer.device=cpu",),
    ],
)
def test_the_loader_hands_batches_over_on_the_model_device(
    identity_tree: Path, backend: str, overrides: tuple[str, ...]
) -> None:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            "data.batch_size=4",
            "augment.train.crop.size=16",
            f"backend={backend}",
            *(["backend.num_workers=0"] if backend == "torch" else []),
            *overrides,
        ]
    )
    with build_loader(cfg, "train") as loader:
        images, labels = next(iter(loader))
        assert loader.device == model_device(cfg)
        assert images.device == labels.device == loader.device


def _torch_spec(identity_tree: Path, *overrides: str) -> Any:
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={identity_tree}",
            "backend=torch",
            "backend.num_workers=0",
            *overrides,
        ]
    )
    return loader_spec(cfg, "train")


@pytest.mark.parametrize(
    "overrides", [("backend.device=gpu",), ("backend.device=cpu", "trainer.device=cuda")]
)
def test_the_torch_backend_pins_and_normalises_on_the_gpu_for_a_gpu_model(
    monkeypatch: pytest.MonkeyPatch, identity_tree: Path, overrides: tuple[str, ...]
) -> None:
    """backend.device=cpu + trainer.device=cuda does what backend.device=gpu always did:
    pinned uint8 batches, normalised on the model's GPU."""
    cuda(monkeypatch, 1)
    normalisers: list[torch.device] = []

    class Recorder:
        def __init__(self, augment: AugmentSpec, device: torch.device) -> None:
            normalisers.append(device)

    monkeypatch.setattr(torch_backend, "Normalizer", Recorder)
    loader = torch_backend.TorchLoader(_torch_spec(identity_tree, *overrides))
    assert loader.device == GPU0 and normalisers == [GPU0]
    assert loader._loader.pin_memory


def test_the_torch_backend_on_a_cpu_model_neither_pins_nor_moves(
    monkeypatch: pytest.MonkeyPatch, identity_tree: Path
) -> None:
    cuda(monkeypatch, 1)
    loader = torch_backend.TorchLoader(_torch_spec(identity_tree, "backend.device=cpu"))
    assert loader.device == CPU and not loader._loader.pin_memory


def test_the_synthetic_backend_makes_its_batch_on_the_model_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 1)
    made: list[torch.device] = []

    def make(self: SyntheticLoader, size: int) -> torch.Tensor:
        made.append(self.device)
        return torch.empty(0)

    monkeypatch.setattr(SyntheticLoader, "_make", make)
    cfg = synthetic_cfg("backend=synthetic", "backend.device=cpu", "trainer.device=cuda")
    assert SyntheticLoader(loader_spec(cfg, "train")).device == GPU0 and made == [GPU0]


def test_prefetched_hands_batches_over_unchanged_or_prepared_on_the_cpu() -> None:
    batches = [
        (torch.full((2, 3, 4, 4), k, dtype=torch.uint8), torch.tensor([k, k])) for k in (1, 2)
    ]
    plain = list(prefetched(batches, CPU))
    for (images, labels), (raw, raw_labels) in zip(plain, batches, strict=True):
        assert torch.equal(images, raw) and torch.equal(labels, raw_labels)
    norm = Normalizer(AugmentSpec(), CPU)
    prepared = list(normalized(batches, norm, CPU))
    for (images, labels), (raw, raw_labels) in zip(prepared, batches, strict=True):
        assert torch.equal(images, norm(raw)) and torch.equal(labels, raw_labels)


# --------------------------------------------------------------------------- doctor


def test_the_doctor_measures_cpu_placements_without_a_gpu_and_gpu_ones_with_one() -> None:
    on_cpu = [c.name for c in candidates(DaliBackend(device="cpu"), gpu=False)]
    assert on_cpu == ["dali-cpu -> cpu model", "torch -> cpu model"]
    on_gpu = candidates(TorchBackend(device="gpu", num_workers=3), gpu=True)
    assert [c.name for c in on_gpu] == [
        "dali-gpu -> gpu model",
        "dali-cpu -> gpu model",
        "torch -> gpu model",
    ]
    assert on_gpu[1].overrides == "backend=dali backend.device=cpu trainer.device=cuda"
    torch_gpu = on_gpu[2].backend
    assert isinstance(torch_gpu, TorchBackend) and torch_gpu.num_workers == 3, "configured options"


def row(name: str, ips: float | None, share: float = 0.5) -> dict[str, Any]:
    return {
        "name": name,
        "overrides": f"{name} overrides",
        "images_per_s": ips,
        "data_wait": None if ips is None else 1 - share,
        "vs_ceiling": None if ips is None else share,
        "fed": share >= 0.9,
        "note": "",
    }


def test_the_doctor_picks_the_fastest_placement_but_keeps_an_earlier_one_within_min_gain() -> None:
    rows = [row("configured", 100.0), row("faster", 102.0), row("fastest", 150.0)]
    assert _pick(rows, 0.03)["name"] == "fastest"  # type: ignore[index]
    assert _pick(rows[:2], 0.03)["name"] == "configured"  # type: ignore[index]
    assert _pick([row("gone", None)], 0.03) is None


def test_the_doctor_says_whether_its_pick_keeps_the_model_fed() -> None:
    fed, starved = row("dali", 95.0, 0.95), row("torch", 40.0, 0.4)
    report = {
        "placement_ceiling_images_per_s": 100.0,
        "placement_model_device": "cuda:0",
        "placements": [fed, starved, {**row("dali-gpu", None), "note": "unavailable: no GPU"}],
        "recommended_placement": fed,
    }
    text = "\n".join(placement_table(report))
    assert "use dali overrides: the fastest, and it keeps the model fed" in text
    assert "unavailable: no GPU" in text
    text = "\n".join(placement_table({**report, "recommended_placement": starved}))
    assert "no placement keeps the model fed" in text and "input-bound" in text


def test_candidate_overrides_select_the_placement_they_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda(monkeypatch, 1)
    for candidate in candidates(DaliBackend(), gpu=True):
        devices = devices_of(synthetic_cfg(*candidate.overrides.split()))
        assert devices.model == GPU0, candidate.name
        assert (devices.made == CPU) == (candidate.backend.device == "cpu"), candidate.name
    cpu_torch = Candidate(TorchBackend(device="cpu"), "cpu")
    assert devices_of(synthetic_cfg(*cpu_torch.overrides.split())) == Devices(CPU, CPU)


# --------------------------------------------------------------------------- with a GPU


def gpu_folder(root: Path, *overrides: str) -> Any:
    return compose_config(
        [
            "data=folder",
            f"data.root={root}",
            "data.batch_size=4",
            "augment.train.crop.size=32",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            *overrides,
        ]
    )


@gpu
@pytest.mark.parametrize("backend", ["dali", "torch", "synthetic"])
def test_cpu_decoding_feeds_a_gpu_model(identity_tree: Path, backend: str) -> None:
    cfg = gpu_folder(
        identity_tree, f"backend={backend}", "backend.device=cpu", "trainer.device=cuda"
    )
    assert model_device(cfg).type == "cuda"
    with build_loader(cfg, "train") as loader:
        assert loader.device == model_device(cfg)
        for images, labels in loader:
            assert images.device == labels.device == loader.device
            assert images.dtype == torch.float32 and images.shape[1:] == (3, 32, 32)


@gpu
def test_training_with_dali_on_the_cpu_puts_the_model_on_the_gpu(
    identity_tree: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dali_pipes.train",
            "data=folder",
            f"data.root={identity_tree}",
            "data.batch_size=4",
            "augment.train.crop.size=32",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
            "model=small_cnn",
            "trainer=quick",
            "trainer.epochs=1",
            "backend=dali",
            "backend.device=cpu",
            "trainer.device=cuda",
            f"output_dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = (tmp_path / "train.log").read_text()
    assert "with backend=dali on cuda:0" in log, log[-2000:]


PROBE = """
import json, sys
from dali_pipes import build_loader, compose_config
from dali_pipes.config.loaders import model_device
cfg = compose_config(sys.argv[1:])
with build_loader(cfg, "train") as loader:
    images, labels = next(iter(loader))
print(json.dumps({"model": str(model_device(cfg)), "loader": str(loader.device),
                  "images": str(images.device)}))
"""


@gpu
@pytest.mark.parametrize("backend_device", ["gpu", "cpu"])
def test_a_process_given_one_gpu_uses_it_as_local_rank_one(
    identity_tree: Path, backend_device: str
) -> None:
    """Per-rank CUDA_VISIBLE_DEVICES (as srun --gpus-per-task=1 sets it): LOCAL_RANK=1 sees
    one device, which is its GPU."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env |= {"CUDA_VISIBLE_DEVICES": "0", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    args = [
        "data=folder",
        f"data.root={identity_tree}",
        "data.batch_size=4",
        "augment.train.crop.size=32",
        "backend=dali",
        f"backend.device={backend_device}",
        "trainer.device=cuda",
    ]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"model": "cuda:0", "loader": "cuda:0", "images": "cuda:0"}


def test_srun_tasks_without_a_rendezvous_address_fail_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dali_pipes.runtime import distributed

    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    slurm(monkeypatch, procid=1, ntasks=4, localid=1, SLURM_NTASKS_PER_NODE="4")
    with pytest.raises(ConfigError, match="MASTER_ADDR and MASTER_PORT is not set") as err:
        distributed.init(torch.device("cpu"))
    assert "\n" not in str(err.value)


def test_srun_tasks_join_the_group_with_slurms_rank_and_world_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dali_pipes.runtime import distributed

    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    slurm(monkeypatch, procid=2, ntasks=4, localid=0, SLURM_NTASKS_PER_NODE="1")
    monkeypatch.setenv("MASTER_ADDR", "localhost")
    monkeypatch.setenv("MASTER_PORT", "29599")
    seen: dict[str, Any] = {}
    monkeypatch.setattr(distributed.tdist, "init_process_group", lambda **kw: seen.update(kw))
    distributed.init(torch.device("cpu"))
    assert (seen["rank"], seen["world_size"], seen["backend"]) == (2, 4, "gloo")
