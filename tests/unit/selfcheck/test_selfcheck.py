"""``python -m dali_pipes.selfcheck``: one line per check, a report, an honest exit code.

The whole self-check runs from an installed wheel in tests/e2e/test_packaging.py; here its
parts: a failing or crashing check, the report files, an unwritable report folder, what
the machine description holds, and the checks' own behaviour on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import HAS_CUDA

from dali_pipes.selfcheck import PHOTOS, checks, environment, nvml
from dali_pipes.selfcheck import run as selfcheck
from dali_pipes.selfcheck.bounds import Bound
from dali_pipes.selfcheck.checks import Setup, compare, not_run
from dali_pipes.selfcheck.report import Report, Result


def fake_checks(*results: list[Result] | Exception) -> tuple[tuple[str, object], ...]:
    def make(outcome: list[Result] | Exception) -> object:
        def check(setup: Setup) -> list[Result]:
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        return check

    return tuple((f"fake {k}", make(outcome)) for k, outcome in enumerate(results))


def run_main(
    monkeypatch: pytest.MonkeyPatch, out: Path, *outcomes: list[Result] | Exception
) -> int:
    monkeypatch.setattr(selfcheck, "CHECKS", fake_checks(*outcomes))
    with pytest.raises(SystemExit) as exit_:
        selfcheck.main(["--out", str(out)])
    return int(exit_.value.code or 0)


def test_a_check_over_its_bound_fails_the_run_and_its_line_gives_figure_and_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = torch.zeros(2, 3, 4, 4), torch.full((2, 3, 4, 4), 2.0)
    over = compare("two grey levels apart", a, b, Bound(1.0, 4))
    within = compare("identical", a, a, Bound(1.0, 4))
    assert run_main(monkeypatch, tmp_path, [over, within, not_run("a GPU check")]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "two grey levels apart" in line)
    assert line.startswith("FAIL") and "mean 2.000" in line and "bound mean 1.000" in line
    assert any(line.startswith("ok") and "identical" in line for line in out.splitlines())
    assert "not run a GPU check: no GPU" in out
    report = json.loads((tmp_path / "selfcheck.json").read_text())
    assert not report["passed"] and report["counts"] == {"ok": 1, "FAIL": 1, "not run": 1}
    assert report["checks"][0]["figures"]["measured"]["mean"] == 2.0


def test_only_checks_that_ran_count_and_all_passing_exits_0(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    a = torch.zeros(1, 3, 2, 2)
    assert (
        run_main(monkeypatch, tmp_path, [compare("same", a, a, Bound(0.0, 0)), not_run("gpu")]) == 0
    )


def test_a_check_that_raises_is_one_fail_line_and_the_others_still_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = torch.zeros(1, 3, 2, 2)
    code = run_main(
        monkeypatch,
        tmp_path,
        RuntimeError("DALI said no\nand many more lines"),
        [compare("after", a, a, Bound(0.0, 0))],
    )
    assert code == 1
    captured = capsys.readouterr()
    assert "FAIL    fake 0: RuntimeError: DALI said no\n" in captured.out
    assert "ok      after" in captured.out and "Traceback" not in captured.out + captured.err


def test_an_unwritable_report_folder_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert run_main(monkeypatch, blocker / "report", []) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(blocker / "report") in err and "--out" in err


def test_the_report_files_say_whether_the_gpu_half_ran(tmp_path: Path) -> None:
    results = (Result("x", "ok", "fine"), Result("y", "not run", "no GPU"))
    report = Report({"versions": {"torch": "2"}}, results, gpu=False, quick=True)
    md, js = report.write(tmp_path / "deep" / "er")
    text = md.read_text()
    assert "did NOT run" in text and "| ok | x | fine |" in text and "versions.torch | 2" in text
    assert json.loads(js.read_text())["gpu_half_ran"] is False
    assert sorted(p.name for p in md.parent.iterdir()) == ["selfcheck.json", "selfcheck.md"]


def test_shapes_that_differ_fail_instead_of_broadcasting() -> None:
    result = compare("shapes", torch.zeros(2, 3, 4, 4), torch.zeros(1, 3, 4, 4), Bound(255.0))
    assert result.status == "FAIL" and "shapes differ" in result.detail


def test_the_machine_description_has_what_a_bug_report_needs() -> None:
    facts = environment.describe()
    for package in ("dali-pipes", "nvidia-dali-cuda120", "torch", "torchvision"):
        assert facts["versions"][package], package
    assert set(facts["cuda"]) == {"torch_runtime", "dali_built_with", "driver_supports", "driver"}
    assert facts["cpu"]["this_process"] >= 1 and facts["date"]
    if not HAS_CUDA:
        assert "none visible" in facts["gpu"]
        assert environment.hardware_decoder(PHOTOS, 0.65) == "not checked: no GPU"


def test_nvml_answers_none_where_it_has_nothing_to_say() -> None:
    with nvml.session() as lib:
        if lib is None:  # no NVIDIA driver here
            assert nvml.driver_version(lib) is None
        assert nvml.device(lib, "GPU-00000000-0000-0000-0000-000000000000") is None
        assert nvml.jpeg_utilisation(lib, None) is None


@pytest.mark.skipif(HAS_CUDA, reason="the CPU half of the checks")
def test_without_a_gpu_the_gpu_checks_say_not_run_and_the_cpu_ones_run(tmp_path: Path) -> None:
    setup = Setup(photos=PHOTOS, work=tmp_path, gpu=False, quick=True)
    results = checks.handover(setup) + checks.gpu_memory(setup) + checks.cache(setup)
    statuses = {result.name: result.status for result in results}
    assert statuses == {
        "dali-cpu -> GPU: DALI's copy": "not run",
        "torch backend's CUDA prefetcher": "not run",
        "GPU memory over epochs": "not run",
        "data.cache=gpu's graph (CPU twin) vs data.cache=ram": "ok",
        "data.cache=gpu vs data.cache=ram": "not run",
    }
