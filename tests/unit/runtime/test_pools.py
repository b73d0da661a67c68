"""Worker processes that start from a fresh interpreter: pools, and the torch backend's
DataLoader workers."""

import copy
import dataclasses
import importlib
import os
import subprocess
import sys
import types
from typing import Any

import pytest
import torch
from conftest import TESTS
from helpers.warm import python

from dali_pipes import build_loader, compose_config, registry
from dali_pipes.backends import create_loader
from dali_pipes.config.specs import loader_spec
from dali_pipes.runtime.pools import CallersEnvironment, fresh_pool, importable_afresh


def _read(name: str) -> str | None:
    return os.environ.get(name)


def test_a_pool_started_after_the_server_sees_the_environment_of_its_caller_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "DALI_PIPES_TEST_POOL_VARIABLE"
    monkeypatch.delenv(name, raising=False)
    with fresh_pool(1, [__name__]) as pool:  # starts the server without the variable
        assert pool.apply(_read, (name,)) is None
    monkeypatch.setenv(name, "set after the server started")
    with fresh_pool(1, [__name__]) as pool:
        assert pool.apply(_read, (name,)) == "set after the server started"
    monkeypatch.delenv(name)
    with fresh_pool(1, [__name__]) as pool:
        assert pool.apply(_read, (name,)) is None


PLUGINS = TESTS / "plugins"


class _Importable:
    """A class of an importable module (this test module)."""


def test_only_what_a_fresh_interpreter_can_import_counts_as_importable_afresh() -> None:
    assert importable_afresh([_Importable(), {"a": (1, 2.0)}, os.path.join])
    made = types.ModuleType("made_at_run_time")  # as a notebook's or exec'd code's classes
    exec("class Source:\n    pass\n", made.__dict__)
    sys.modules["made_at_run_time"] = made
    try:
        assert not importable_afresh([_Importable(), made.Source()])
    finally:
        del sys.modules["made_at_run_time"]
    assert not importable_afresh(lambda: 0)  # a lambda does not pickle
    main = type("Main", (), {"__module__": "__main__"})
    assert not importable_afresh(main)


class _Pid(torch.utils.data.Dataset[int]):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> int:
        return os.getppid()


def test_the_torch_backends_workers_start_from_a_fresh_interpreter_unless_they_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers of a dali_pipes source come from the forkserver, not from this process
    (whose threads a fork would copy in mid-step); a dataset it cannot rebuild is forked."""
    # Plug-ins other tests of this process registered are another matter (below).
    monkeypatch.setattr(registry, "plugin_modules", set)
    cfg = compose_config(["backend=torch", "backend.num_workers=1", "data.batch_size=4"])
    loader: Any
    with build_loader(cfg, "val") as loader:
        context = loader._loader.multiprocessing_context
        assert context is not None and context.get_start_method() == "forkserver"
        parents = list(
            torch.utils.data.DataLoader(_Pid(), num_workers=1, multiprocessing_context=context)
        )
        assert int(parents[0]) != os.getpid()
        next(iter(loader))
    # The same source as an instance of a class made at run time (as in a notebook).
    spec = loader_spec(cfg, "val")
    made = types.ModuleType("made_at_run_time")
    made_source = type("Source", (type(spec.source),), {"__module__": made.__name__})
    made.__dict__["Source"] = made_source
    monkeypatch.setitem(sys.modules, made.__name__, made)
    source = copy.copy(spec.source)
    object.__setattr__(source, "__class__", made_source)
    with create_loader(dataclasses.replace(spec, source=source)) as loader:
        assert loader._loader.multiprocessing_context is None  # DataLoader's default: fork
        images, _ = next(iter(loader))
        assert images.shape[0] == 4


def test_workers_import_the_callers_plug_ins_or_are_forked_when_a_fresh_one_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plug-in module registered in the caller is imported again by each worker (from
    the caller's import path); one a fresh interpreter cannot find means a fork."""
    cfg = compose_config(["backend=torch", "backend.num_workers=1", "data.batch_size=4"])
    loader: Any
    made = types.ModuleType("made_at_run_time_too")  # no file: a fresh one cannot import it
    monkeypatch.setitem(sys.modules, made.__name__, made)
    monkeypatch.setattr(registry, "plugin_modules", lambda: {made.__name__})
    with build_loader(cfg, "val") as loader:
        assert loader._loader.multiprocessing_context is None  # forked
    monkeypatch.setattr(registry, "plugin_modules", lambda: {"custom_ops"})
    monkeypatch.syspath_prepend(str(PLUGINS))
    importlib.import_module("custom_ops")  # as the caller imported its plug-in
    start = CallersEnvironment()
    assert start.portable and start.modules == ["custom_ops"]
    with build_loader(cfg, "val") as loader:
        assert loader._loader.multiprocessing_context.get_start_method() == "forkserver"
        next(iter(loader))
    # imported from a folder no longer on the path: its folder goes with the workers
    monkeypatch.undo()
    monkeypatch.setattr(registry, "plugin_modules", lambda: {"custom_ops"})
    assert str(PLUGINS) not in sys.path and "custom_ops" in sys.modules
    start = CallersEnvironment()
    assert start.portable and str(PLUGINS) in start.path


_CRASHING_WORKER = """
import ctypes, io, sys
import torch
from dali_pipes.runtime.pools import crashes_print_their_stack

class Crashes(torch.utils.data.Dataset):
    def __len__(self):
        return 1
    def __getitem__(self, index):
        return ctypes.string_at(0)  # reads address 0: a segmentation fault

sys.stderr = io.StringIO()  # as a test runner or a notebook leaves it: no file behind it
loader = torch.utils.data.DataLoader(
    Crashes(), num_workers=1, worker_init_fn=crashes_print_their_stack
)
try:
    next(iter(loader))
except RuntimeError as error:
    print(error)
"""


def test_a_worker_killed_by_a_segmentation_fault_prints_its_python_stack() -> None:
    done = subprocess.run(
        [python(), "-c", _CRASHING_WORKER],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TESTS.parent,
        check=False,
    )
    assert "exited unexpectedly" in done.stdout, done.stdout + done.stderr
    assert "Fatal Python error: Segmentation fault" in done.stderr, done.stderr
    assert "in __getitem__" in done.stderr, done.stderr
