"""Where batches are made (backend.device) and where the model trains (trainer.device),
and which GPU a process uses; and the pair's output device when a config becomes a spec.

The decisions are checked on any machine with ``torch.cuda.is_available`` and
``device_count`` patched (nothing touches a real GPU there).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.launch import CPU, GPU0, cuda, slurm, synthetic_cfg

from dali_pipes import compose_config
from dali_pipes.backends.base import loader_devices
from dali_pipes.config.loaders import devices_of, model_device
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import ConfigError, DeviceError
from dali_pipes.runtime import devices as device_mod
from dali_pipes.runtime.devices import Devices, local_gpu, resolve_device, resolve_devices

ROOT = Path(__file__).resolve().parents[1]


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------- the pair


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


# --------------------------------------------------------------------------- config -> spec


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
