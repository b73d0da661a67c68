"""What a process of dali_pipes imports before it does any work.

``import torchvision`` imports ``torchvision.models`` and with it ``torch._dynamo``: more CPU
time than torch itself, paid by every ``python -m dali_pipes.train`` and tool and every
rank of a ``torchrun`` job. A run on DALI never calls torchvision, so the package, the
training entry point and the DALI loader (``DALIIterator`` over a folder included) must not
import it; the torch backend and the
torchvision mapping import it when they are used (:mod:`dali_pipes.augment.tv_functional`).
"""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

ENTRY_POINTS = (
    "dali_pipes",
    "dali_pipes.train.run",
    "dali_pipes.backends.dali.loader",
    "dali_pipes.augment.auto.slots",
    "dali_pipes.data.sample_set",
    "dali_pipes.config.specs",
)


def imported(modules: tuple[str, ...], *then: str) -> list[str]:
    """The torchvision modules a fresh interpreter holds after importing ``modules`` and
    running the statements ``then``."""
    report = "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torchvision'))"
    code = "; ".join([*(f"import {m}" for m in modules), *then, "import sys", report])
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    return list(eval(done.stdout.strip()))  # a printed list of names


def test_the_package_the_training_entry_point_and_the_dali_loader_do_not_import_torchvision() -> (
    None
):
    made = "DALIIterator('dali_pipes/selfcheck/photos', batch_size=4, device='cpu').close()"
    assert imported(ENTRY_POINTS, "from dali_pipes import DALIIterator", made) == []


def test_the_lazy_functional_module_imports_torchvision_on_first_use() -> None:
    found = imported(
        ("dali_pipes.augment.tv_functional",),
        "from dali_pipes.augment.tv_functional import F",
        "assert F.InterpolationMode.BILINEAR.value == 'bilinear'",
    )
    assert "torchvision.transforms.v2.functional" in found
