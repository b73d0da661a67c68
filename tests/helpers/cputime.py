"""A pytest plugin that reports each test's CPU time, its own and its finished children's.

Wall-clock ``--durations`` on a busy machine say more about the neighbours than about the
test; CPU seconds (user + system, of the test process and of every subprocess it waited
for, torchrun's ranks included) change little with the load, so they are the figure to
compare before and after a change to a test. Enable it from the repository root with
``-p tests.helpers.cputime`` (plugins load before ``tests/`` is on the path)::

    .venv/bin/python -m pytest -p tests.helpers.cputime -p no:xdist tests/e2e/test_train.py
    DALI_PIPES_TESTS_COLD=1 make test ARGS="-p tests.helpers.cputime --cpu-json=cpu.jsonl"

and it prints the slowest tests by CPU time at the end (``--cpu-top=N``, default 25), and
appends each test's figures to ``--cpu-json=PATH`` as it ends (JSON lines: a run stopped
half-way still leaves what it measured). Under pytest-xdist each
worker measures its own tests, and the figures reach the controlling process with the
reports. A command started from the tests' warm interpreter (helpers/warm.py) is that
interpreter's child, not the test's: ``DALI_PIPES_TESTS_COLD=1`` charges it to its test
(and costs each command its start-up again). A session fixture's setup is charged to
the first test that needs it (a fixture of :mod:`helpers.shared` to the first test of the
whole run that needs it).
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

_KEY = "cpu_seconds"
_START = pytest.StashKey[tuple[float, float]]()
_rows: list[tuple[str, float, float, float]] = []
_json: Path | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cputime", "CPU time per test (helpers.cputime)")
    group.addoption("--cpu-top", type=int, default=25, help="how many tests to list")
    group.addoption("--cpu-json", default=None, help="append each test's CPU time here")


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process and of its waited-for descendants."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    item.stash[_START] = _cpu()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    start = item.stash.get(_START, None)
    if call.when == "teardown" and start is not None:
        own, children = _cpu()
        report.user_properties.append((_KEY, (own - start[0], children - start[1])))
    return report


def pytest_configure(config: pytest.Config) -> None:
    global _json
    where = config.getoption("--cpu-json")
    _json = Path(where) if where and not os.environ.get("PYTEST_XDIST_WORKER") else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "teardown":
        return
    for key, value in report.user_properties:
        if key == _KEY and isinstance(value, (list, tuple)):
            own, children = float(value[0]), float(value[1])
            _rows.append((report.nodeid, own + children, own, children))
            if _json is not None:
                row = {"test": report.nodeid, "cpu": own + children, "own": own}
                with _json.open("a") as f:
                    f.write(json.dumps({**row, "children": children}) + "\n")


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """The tests that took the most CPU time, with the run's total."""
    if not _rows:
        return
    rows = sorted(_rows, key=lambda row: -row[1])
    total = sum(row[1] for row in rows)
    terminalreporter.section(f"CPU time per test: {total:.0f} s in {len(rows)} tests")
    for nodeid, cpu, own, children in rows[: config.getoption("--cpu-top")]:
        terminalreporter.write_line(
            f"{cpu:8.1f} s  (own {own:6.1f}, children {children:6.1f})  {nodeid}"
        )
