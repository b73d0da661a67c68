"""What the self-check's report says about the machine: the version that runs, and never the
GPU's serial number (the report is meant for public bug reports)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import dali_pipes
from dali_pipes.selfcheck import environment
from dali_pipes.selfcheck import run as selfcheck
from dali_pipes.selfcheck.report import Report, Result

SERIAL = "fb4ffd17-a675-0338-5e73-c68c078704d4"


def test_a_source_tree_that_is_not_installed_reports_its_own_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on the GPU machine, where the tree runs from PYTHONPATH: no installed dali-pipes."""
    real = importlib.metadata.version

    def installed(name: str) -> str:
        if name == "dali-pipes":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", installed)
    facts = environment.describe()
    assert facts["versions"]["dali-pipes"] == dali_pipes.__version__
    headline = selfcheck._headline({**facts, "hardware_jpeg_decoder": "not checked: no GPU"})
    assert headline["dali_pipes"] == f"{dali_pipes.__version__} (commit {facts['commit']})"


def test_the_report_leaves_the_gpus_uuid_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    props = SimpleNamespace(
        name="NVIDIA H200", total_memory=141 * 2**30, major=9, minor=0, uuid=SERIAL
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *index: props.name)
    facts = environment.describe()
    assert facts["gpu"]["name"] == "NVIDIA H200"
    md, js = Report(facts, (Result("x", "ok", "fine"),), gpu=True, quick=True).write(tmp_path)
    for text in (json.dumps(facts), md.read_text(), js.read_text()):
        assert SERIAL not in text and "uuid" not in text
