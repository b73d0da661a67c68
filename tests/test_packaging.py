"""The built wheel ships the whole package: every module and every Hydra config.

An editable install finds any file in the working tree, so a subpackage missing from
pyproject's ``[tool.setuptools] packages`` (dali_pipes.augment once was) only shows in a
regular install -- the Docker image's, or a user's ``pip install .``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE, CONF = ROOT / "dali_pipes", ROOT / "conf"


def _source_files(top: Path, pattern: str) -> list[Path]:
    return sorted(p for p in top.rglob(pattern) if "__pycache__" not in p.parts)


def test_pyproject_lists_every_directory_of_the_package() -> None:
    """The quick, one-line version of the wheel test below."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(listed["packages"])
    for module in _source_files(PACKAGE, "*.py"):
        parts = module.parent.relative_to(ROOT).parts
        assert ".".join(parts) in packages, f"{module.parent.name}/ is not in {sorted(packages)}"


def test_the_wheel_holds_every_module_and_config(tmp_path: Path) -> None:
    # Build from a clean copy: a build/ directory left in the checkout can hold modules the
    # current settings would leave out, and would hide exactly the bug this looks for.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for top in (PACKAGE, CONF):
        shutil.copytree(top, src / top.name, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir"]
    build = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(dist)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = dist.glob("dali_pipes-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())

    expected = [
        f"dali_pipes/{p.relative_to(PACKAGE).as_posix()}" for p in _source_files(PACKAGE, "*.py")
    ]
    expected += [
        f"dali_pipes/conf/{p.relative_to(CONF).as_posix()}"
        for pattern in ("*.py", "*.yaml")
        for p in _source_files(CONF, pattern)
    ]
    assert len(expected) > 50 and "dali_pipes/conf/train.yaml" in expected
    missing = [name for name in expected if name not in shipped]
    assert not missing, f"{wheel.name} lacks {len(missing)} files: {missing[:8]}"
