"""The built wheel ships the whole package: every module and every Hydra config.

An editable install finds any file in the working tree, so a subpackage missing from
pyproject's ``[tool.setuptools] packages`` (dali_pipes.augment once was) only shows in a
regular install -- the Docker image's, or a user's ``pip install .``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import HAS_CUDA, REPO

ROOT = REPO
PACKAGE, CONF = ROOT / "dali_pipes", ROOT / "conf"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir"]


def _source_files(top: Path, pattern: str) -> list[Path]:
    return sorted(p for p in top.rglob(pattern) if "__pycache__" not in p.parts)


def test_pyproject_lists_every_directory_of_the_package() -> None:
    """The quick, one-line version of the wheel test below."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(listed["packages"])
    for module in _source_files(PACKAGE, "*.py"):
        parts = module.parent.relative_to(ROOT).parts
        assert ".".join(parts) in packages, f"{module.parent.name}/ is not in {sorted(packages)}"


def test_the_wheel_holds_every_module_config_and_shipped_photo(wheel: Path) -> None:
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = [
        f"dali_pipes/{p.relative_to(PACKAGE).as_posix()}"
        for pattern in ("*.py", "*.jpg", "SOURCE.md")
        for p in _source_files(PACKAGE, pattern)
    ]
    expected += [
        f"dali_pipes/conf/{p.relative_to(CONF).as_posix()}"
        for pattern in ("*.py", "*.yaml")
        for p in _source_files(CONF, pattern)
    ]
    assert len(expected) > 50 and "dali_pipes/conf/train.yaml" in expected
    assert sum(name.endswith(".jpg") for name in expected) == 13
    missing = [name for name in expected if name not in shipped]
    assert not missing, f"{wheel.name} lacks {len(missing)} files: {missing[:8]}"


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="checks the report of a machine without a GPU")
def test_selfcheck_from_the_wheel_in_a_fresh_venv_passes_and_says_the_gpu_half_did_not_run(
    wheel: Path, tmp_path: Path
) -> None:
    """The wheel installed without the repository: a new virtual environment gets the
    wheel alone (``--no-deps``, by this environment's pip: the new one needs none of its
    own); its dependencies are this environment's, made visible through a ``.pth`` file
    rather than downloaded again (torch alone is gigabytes). It runs from a folder outside
    the checkout, so nothing of the repository is importable."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Every site-packages folder this environment sees (one, in a plain venv), not only its
    # own: a .pth file in a folder named by another .pth is not read.
    deps = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (Path(site) / "_dali_pipes_test_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    install = subprocess.run(
        [*PIP, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    where = tmp_path / "elsewhere"
    where.mkdir()
    found = subprocess.run(  # where `import dali_pipes` finds it, without running it
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('dali_pipes').origin)"],
        capture_output=True,
        text=True,
        cwd=where,
        check=True,
    ).stdout.strip()
    assert Path(found).is_relative_to(venv), found  # the wheel's copy, not the checkout
    out = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DALI_PIPES_PHOTOS")}
    run = subprocess.run(  # --quick: the same checks on fewer presets and graphs
        [str(python), "-m", "dali_pipes.selfcheck", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=where,
        env=env,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert "the GPU half did NOT run" in run.stdout
    lines = [
        line for line in run.stdout.splitlines() if line.startswith(("ok ", "FAIL", "not run"))
    ]
    assert lines and not any(line.startswith("FAIL") for line in lines), run.stdout
    assert sum(line.startswith("ok ") for line in lines) >= 10
    report = json.loads((out / "selfcheck.json").read_text())
    assert report["passed"] and not report["gpu_half_ran"] and report["quick"]
    assert report["environment"]["versions"]["dali-pipes"]
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses["GPU graphs defined and traced"] == "ok"
    assert statuses["data.cache=gpu vs data.cache=ram"] == "not run"
    assert "did NOT run" in (out / "selfcheck.md").read_text()


def test_torchvision_is_capped_while_decode_uses_its_deprecated_decoders() -> None:
    """torchvision deprecated its image decoders in 0.29; dali_pipes keeps them (the
    reason is decode.TORCHVISION_DECODING), so a torchvision that may drop them is kept
    out until decode.py no longer calls them."""
    import torchvision
    import torchvision.io
    from packaging.requirements import Requirement
    from packaging.version import Version

    from dali_pipes.image import decode

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (req,) = [Requirement(r) for r in project["dependencies"] if r.startswith("torchvision")]
    uses = "torchvision.io" in (PACKAGE / "image" / "decode.py").read_text()
    assert uses and decode.TORCHVISION_DECODING.startswith("kept")
    caps = [spec for spec in req.specifier if spec.operator in ("<", "<=")]
    assert caps, f"{req}: decode.py uses torchvision's deprecated decoders, keep the cap"
    assert Version(torchvision.__version__.split("+")[0]) in req.specifier
    assert callable(torchvision.io.decode_image)
